"""ElastiCache Serverless (Valkey): the fast tier in front of DynamoDB for race pages,
sold-out flags and hold counters. Billed per use, TLS always on, reachable only from
the functions' security group."""

from __future__ import annotations

from aws_cdk import Names
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_elasticache as elasticache
from constructs import Construct

from .. import constants as c
from .network import Network


class Cache(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, network: Network) -> None:
        super().__init__(scope, construct_id)
        security_group = ec2.SecurityGroup(
            self,
            c.CACHE_SG_ID,
            vpc=network.vpc,
            description="Racecap cache: Valkey from the functions only",
            allow_all_outbound=False,
        )
        for port in (c.CACHE_PORT, c.CACHE_READER_PORT):
            security_group.add_ingress_rule(network.cache_clients, ec2.Port.tcp(port), "Valkey from functions")

        subnet_ids = network.vpc.select_subnets(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS).subnet_ids
        self.cache = elasticache.CfnServerlessCache(
            self,
            c.SERVERLESS_CACHE_ID,
            # The name is required and must be unique per account and region.
            serverless_cache_name=Names.unique_resource_name(self, max_length=40, separator="-").lower(),
            engine=c.CACHE_ENGINE,
            major_engine_version=c.CACHE_MAJOR_VERSION,
            subnet_ids=subnet_ids,
            security_group_ids=[security_group.security_group_id],
            description="Racecap race pages, sold-out flags, hold counters",
        )
        self.url = f"rediss://{self.cache.attr_endpoint_address}:{c.CACHE_PORT}"
