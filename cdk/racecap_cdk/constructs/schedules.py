"""EventBridge rules from ``blueprint.SCHEDULES``: invoke a function every N minutes
(the local stack's scheduler thread does the same)."""

from __future__ import annotations

from aws_cdk import Duration, Tags
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

import blueprint

from .. import constants as c


class Schedules(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, functions: dict[str, lambda_.Function]) -> None:
        super().__init__(scope, construct_id)
        self.rules: dict[str, events.Rule] = {}
        for decl in blueprint.SCHEDULES:
            rule = events.Rule(
                self,
                decl.id,
                description=f"Invoke {decl.function} every {decl.every_minutes} min",
                schedule=events.Schedule.rate(Duration.minutes(decl.every_minutes)),
                # A missed tick is harmless: the next one comes a period later.
                targets=[targets.LambdaFunction(functions[decl.function], retry_attempts=0)],
            )
            Tags.of(rule).add(c.BLUEPRINT_TAG, decl.id)
            self.rules[decl.id] = rule
