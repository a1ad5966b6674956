// Starts DynamoDB Local bound to one host (default 127.0.0.1) instead of all interfaces.
//
// DynamoDB Local has no host flag: DynamoDBProxyServer builds `new org.eclipse.jetty.server.Server(port)`,
// whose ServerConnector listens on 0.0.0.0. We let DynamoDB Local parse its own command line
// (ServerRunner.createServerFromCommandLineArgs), then set the host on the Jetty connectors
// before starting. Telemetry is never configured, so nothing is sent anywhere.
//
// Usage: java -Dracecap.host=127.0.0.1 [-Dracecap.backlog=1024] -Djava.library.path=<dir with sqlite4java .so>
//             -cp <dynamodb jars>:<dir of this class> LocalDynamo -inMemory -port N -disableTelemetry
import com.amazonaws.services.dynamodbv2.local.main.ServerRunner;
import com.amazonaws.services.dynamodbv2.local.server.DynamoDBProxyServer;
import java.lang.reflect.Field;
import org.eclipse.jetty.server.Connector;
import org.eclipse.jetty.server.AbstractNetworkConnector;
import org.eclipse.jetty.server.NetworkConnector;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;

public final class LocalDynamo {
    private LocalDynamo() {}

    public static void main(String[] args) throws Exception {
        String host = System.getProperty("racecap.host", "127.0.0.1");
        // Jetty's default listen backlog is 50; bursts from the load tests need more.
        int backlog = Integer.getInteger("racecap.backlog", 1024);
        DynamoDBProxyServer proxy = ServerRunner.createServerFromCommandLineArgs(args);
        Field field = DynamoDBProxyServer.class.getDeclaredField("server");
        field.setAccessible(true);
        Server jetty = (Server) field.get(proxy);
        Connector[] connectors = jetty.getConnectors();
        if (connectors.length == 0) {
            throw new IllegalStateException("DynamoDB Local created no Jetty connector");
        }
        for (Connector connector : connectors) {
            if (!(connector instanceof AbstractNetworkConnector)) {
                throw new IllegalStateException("unexpected Jetty connector " + connector);
            }
            ((AbstractNetworkConnector) connector).setHost(host);
            if (connector instanceof ServerConnector) {
                ((ServerConnector) connector).setAcceptQueueSize(backlog);
            }
        }
        // safeStart() = jetty.start() without the telemetry call that start() makes.
        proxy.safeStart();
        for (Connector connector : jetty.getConnectors()) {
            NetworkConnector nc = (NetworkConnector) connector;
            System.out.println("LocalDynamo listening on " + nc.getHost() + ":" + nc.getLocalPort());
        }
        System.out.flush();
        proxy.join();
    }
}
