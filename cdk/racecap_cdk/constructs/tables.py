"""One DynamoDB table per ``blueprint.TABLES`` entry: on demand, point-in-time recovery,
encrypted, keys/indexes/TTL exactly as declared (the local stack creates the same)."""

from __future__ import annotations

from aws_cdk import RemovalPolicy, Tags
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_kms as kms
from constructs import Construct

import blueprint

from .. import constants as c
from ..scanners import suppress

WHY_NO_CMK = (
    "No runner's personal data here (race and event definitions, public on the site): encrypted with "
    "DynamoDB's AWS managed key; the customer managed key guards the tables that hold runners' data."
)
_TYPES = {"S": dynamodb.AttributeType.STRING, "N": dynamodb.AttributeType.NUMBER}


def _attr(key: blueprint.Key) -> dynamodb.Attribute:
    return dynamodb.Attribute(name=key.name, type=_TYPES[key.type])


class Tables(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, personal_data_key: kms.IKey) -> None:
        super().__init__(scope, construct_id)
        self._key = personal_data_key
        self.by_id: dict[str, dynamodb.Table] = {t.id: self._table(t) for t in blueprint.TABLES}

    def _table(self, decl: blueprint.Table) -> dynamodb.Table:
        keep = decl.id not in c.DISPOSABLE_TABLES
        table = dynamodb.Table(
            self,
            decl.id,
            partition_key=_attr(decl.partition_key),
            sort_key=_attr(decl.sort_key) if decl.sort_key else None,
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            encryption=(
                dynamodb.TableEncryption.CUSTOMER_MANAGED
                if decl.personal_data
                else dynamodb.TableEncryption.AWS_MANAGED
            ),
            encryption_key=self._key if decl.personal_data else None,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            time_to_live_attribute=decl.ttl_attribute,
            removal_policy=RemovalPolicy.RETAIN if keep else RemovalPolicy.DESTROY,
            deletion_protection=keep,
        )
        for index in decl.indexes:
            table.add_global_secondary_index(
                index_name=index.name,
                partition_key=_attr(index.partition_key),
                sort_key=_attr(index.sort_key) if index.sort_key else None,
                projection_type=dynamodb.ProjectionType[index.projection["ProjectionType"]],
                non_key_attributes=index.projection.get("NonKeyAttributes"),
            )
        Tags.of(table).add(c.BLUEPRINT_TAG, decl.id)
        if not decl.personal_data:
            suppress(table, "checkov", "CKV_AWS_119", WHY_NO_CMK)
        return table
