"""The private network: isolated subnets only (no NAT, nothing to pay for when idle
except the interface endpoints), reaching AWS services through VPC endpoints."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_logs as logs
from constructs import Construct

from .. import constants as c

# Services the functions call that are not reached through the DynamoDB gateway endpoint.
_INTERFACE_ENDPOINTS: dict[str, ec2.InterfaceVpcEndpointAwsService] = {
    c.SQS_ENDPOINT_ID: ec2.InterfaceVpcEndpointAwsService.SQS,
    # com.amazonaws.<region>.email: the SES API (v1 and v2), not the SMTP endpoint.
    c.SES_ENDPOINT_ID: ec2.InterfaceVpcEndpointAwsService.EMAIL,
    c.STEP_FUNCTIONS_ENDPOINT_ID: ec2.InterfaceVpcEndpointAwsService.STEP_FUNCTIONS,
}


class Network(Construct):
    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        self.vpc = ec2.Vpc(
            self,
            c.VPC_ID,
            max_azs=2,
            nat_gateways=0,
            subnet_configuration=[
                ec2.SubnetConfiguration(
                    name=c.ISOLATED_SUBNET_NAME, subnet_type=ec2.SubnetType.PRIVATE_ISOLATED, cidr_mask=22
                )
            ],
            # Nothing uses the default group; restricting it would add a Node.js custom resource.
            restrict_default_security_group=False,
        )
        self.subnets = ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_ISOLATED)
        flow_logs = logs.LogGroup(
            self,
            c.FLOW_LOG_GROUP_ID,
            retention=c.LOG_RETENTION,
            removal_policy=RemovalPolicy.DESTROY,
        )
        # Rejected flows only: the useful signal (a blocked dependency) at a fraction of the cost.
        self.vpc.add_flow_log(
            c.FLOW_LOG_ID,
            destination=ec2.FlowLogDestination.to_cloud_watch_logs(flow_logs),
            traffic_type=ec2.FlowLogTrafficType.REJECT,
        )
        self.vpc.add_gateway_endpoint(
            c.DYNAMODB_ENDPOINT_ID,
            service=ec2.GatewayVpcEndpointAwsService.DYNAMODB,
            subnets=[self.subnets],
        )
        # Every function carries this group; the endpoints admit HTTPS from it alone.
        # Isolated subnets: the only ways out are the endpoints, so egress stays open.
        self.functions = ec2.SecurityGroup(self, c.FUNCTIONS_SG_ID, vpc=self.vpc, description="Racecap functions")
        endpoints = ec2.SecurityGroup(
            self,
            c.ENDPOINTS_SG_ID,
            vpc=self.vpc,
            description="Racecap interface endpoints: HTTPS from the functions",
            allow_all_outbound=False,
        )
        endpoints.add_ingress_rule(self.functions, ec2.Port.tcp(443), "AWS APIs from functions")
        for endpoint_id, service in _INTERFACE_ENDPOINTS.items():
            self.vpc.add_interface_endpoint(
                endpoint_id,
                service=service,
                subnets=self.subnets,
                private_dns_enabled=True,
                security_groups=[endpoints],
                open=False,
            )
        # Functions that use the cache also carry this group; the cache admits only it.
        self.cache_clients = ec2.SecurityGroup(
            self, c.CACHE_CLIENTS_SG_ID, vpc=self.vpc, description="Racecap functions that use the cache"
        )

    def security_groups(self, needs_cache: bool) -> list[ec2.ISecurityGroup]:
        return [self.functions, self.cache_clients] if needs_cache else [self.functions]
