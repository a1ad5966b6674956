"""The private network: private subnets whose one way out is a NAT *instance*.

The functions call AWS APIs (SQS, SES, Step Functions, Secrets Manager) and the payment
provider (Stripe), which is on the internet. The fixed-cost choices were:

- a NAT gateway: ~$33 per AZ-month before any traffic, plus $0.045/GB;
- interface endpoints for the AWS APIs: $7.30 per service per AZ-month (three services in
  two AZs were ~$44 of the stage's ~$50 idle cost), and they still do not reach Stripe;
- one NAT instance (t4g.nano, ~$3/month + disk + public IPv4 ~$7.40 in all) that carries
  both, so the interface endpoints go away.

DynamoDB, the hot path, and S3 keep gateway endpoints (free, never through the instance). The
instance is one point of failure for egress (EC2 recovers it automatically on host failure);
a lost egress is seen as "payment provider unavailable" (a 503 the runner retries, the
place kept) and SQS/SES calls retried by the SDKs; set ``NAT_INSTANCES = 2`` for one per AZ.
"""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_logs as logs
from constructs import Construct

from .. import constants as c
from ..scanners import WHY_LOGS_NO_CMK, suppress

WHY_NAT_PUBLIC_IP = (
    "A NAT instance needs a public address to carry the functions' outbound HTTPS (the payment provider); its "
    "security group admits HTTPS from the functions only."
)


class Network(Construct):
    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        self.nat = ec2.NatProvider.instance_v2(
            instance_type=ec2.InstanceType(c.NAT_INSTANCE_TYPE),
            machine_image=ec2.MachineImage.latest_amazon_linux2023(cpu_type=ec2.AmazonLinuxCpuType.ARM_64),
            # Nothing may reach in from the internet; the functions' group is admitted below.
            default_allowed_traffic=ec2.NatTrafficDirection.OUTBOUND_ONLY,
            associate_public_ip_address=True,
        )
        self.vpc = ec2.Vpc(
            self,
            c.VPC_ID,
            max_azs=2,
            nat_gateway_provider=self.nat,
            nat_gateways=c.NAT_INSTANCES,
            subnet_configuration=[
                ec2.SubnetConfiguration(name=c.PUBLIC_SUBNET_NAME, subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=26),
                ec2.SubnetConfiguration(
                    name=c.PRIVATE_SUBNET_NAME, subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS, cidr_mask=22
                ),
            ],
            # Nothing uses the default group; restricting it would add a Node.js custom resource.
            restrict_default_security_group=False,
        )
        self.subnets = ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)
        self.nat_instances = [
            child
            for subnet in self.vpc.public_subnets
            if isinstance(child := subnet.node.try_find_child("NatInstance"), ec2.Instance)
        ]
        for instance in self.nat_instances:
            suppress(instance, "checkov", "CKV_AWS_88", WHY_NAT_PUBLIC_IP)
            # The provider sizes no disk; give the root volume encryption (and the default size).
            instance.instance.block_device_mappings = [
                ec2.CfnInstance.BlockDeviceMappingProperty(
                    device_name="/dev/xvda",
                    ebs=ec2.CfnInstance.EbsProperty(
                        volume_size=c.NAT_ROOT_VOLUME_GB, volume_type="gp3", encrypted=True, delete_on_termination=True
                    ),
                )
            ]
        flow_logs = logs.LogGroup(
            self,
            c.FLOW_LOG_GROUP_ID,
            retention=c.LOG_RETENTION,
            removal_policy=RemovalPolicy.DESTROY,
        )
        suppress(flow_logs, "checkov", "CKV_AWS_158", WHY_LOGS_NO_CMK)
        # Rejected flows only: the useful signal (a blocked dependency) at a fraction of the cost.
        self.vpc.add_flow_log(
            c.FLOW_LOG_ID,
            destination=ec2.FlowLogDestination.to_cloud_watch_logs(flow_logs),
            traffic_type=ec2.FlowLogTrafficType.REJECT,
        )
        # Gateway endpoints are free and keep DynamoDB (the hot path) and S3 off the instance.
        self.vpc.add_gateway_endpoint(
            c.DYNAMODB_ENDPOINT_ID,
            service=ec2.GatewayVpcEndpointAwsService.DYNAMODB,
            subnets=[self.subnets],
        )
        self.vpc.add_gateway_endpoint(
            c.S3_ENDPOINT_ID, service=ec2.GatewayVpcEndpointAwsService.S3, subnets=[self.subnets]
        )
        # Every function carries this group; the NAT instance admits HTTPS from it alone.
        self.functions = ec2.SecurityGroup(self, c.FUNCTIONS_SG_ID, vpc=self.vpc, description="Racecap functions")
        self.nat.connections.allow_from(self.functions, ec2.Port.tcp(443), "HTTPS out from the functions")
        # Functions that use the cache also carry this group; the cache admits only it.
        self.cache_clients = ec2.SecurityGroup(
            self, c.CACHE_CLIENTS_SG_ID, vpc=self.vpc, description="Racecap functions that use the cache"
        )

    def security_groups(self, needs_cache: bool) -> list[ec2.ISecurityGroup]:
        return [self.functions, self.cache_clients] if needs_cache else [self.functions]
