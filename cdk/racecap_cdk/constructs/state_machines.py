"""One Step Functions state machine per ``blueprint.STATE_MACHINES`` entry, from the very
ASL file the local interpreter runs. The ASL is inlined (not an S3 asset) and its
``${Name}`` placeholders become CloudFormation DefinitionSubstitutions."""

from __future__ import annotations

import re

from aws_cdk import RemovalPolicy, Tags
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

import blueprint

from .. import constants as c
from ..refs import RefResolver, Registry
from ..scanners import WHY_CDK_DEPENDS_ON, WHY_LOGS_NO_CMK, suppress

PLACEHOLDER = re.compile(r"\$\{(\w+)\}")


def read_definition(decl: blueprint.StateMachine) -> str:
    """The ASL text, refusing placeholders the blueprint does not substitute."""
    text = decl.path.read_text()
    unknown = set(PLACEHOLDER.findall(text)) - set(decl.substitutions)
    if unknown:
        raise ValueError(f"{decl.definition_file}: no blueprint substitution for {sorted(unknown)}")
    return text


class StateMachines(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, resolve: RefResolver, registry: Registry) -> None:
        super().__init__(scope, construct_id)
        self.by_id: dict[str, sfn.StateMachine] = {}
        for decl in blueprint.STATE_MACHINES:
            inner = Construct(self, decl.id)
            log_group = logs.LogGroup(
                inner,
                c.LOG_GROUP_ID,
                retention=c.LOG_RETENTION,
                removal_policy=RemovalPolicy.DESTROY,
            )
            machine = sfn.StateMachine(
                inner,
                c.STATE_MACHINE_ID,
                definition_body=sfn.DefinitionBody.from_string(read_definition(decl)),
                definition_substitutions=resolve.resolve_all(decl.substitutions),
                state_machine_type=sfn.StateMachineType(decl.type),
                # Execution data stays out of the logs: it can carry runners' details.
                logs=sfn.LogOptions(destination=log_group, level=sfn.LogLevel.ALL, include_execution_data=False),
                tracing_enabled=True,
            )
            # The role may invoke exactly the functions its definition names.
            for ref in decl.substitutions.values():
                if isinstance(ref, blueprint.FunctionArn):
                    machine.add_to_role_policy(
                        iam.PolicyStatement(
                            actions=["lambda:InvokeFunction"],
                            resources=[registry.functions[ref.function].function_arn],
                        )
                    )
            suppress(log_group, "checkov", "CKV_AWS_158", WHY_LOGS_NO_CMK)
            suppress(machine, "cfn-lint", "W3005", WHY_CDK_DEPENDS_ON)
            Tags.of(inner).add(c.BLUEPRINT_TAG, decl.id)
            self.by_id[decl.id] = machine
