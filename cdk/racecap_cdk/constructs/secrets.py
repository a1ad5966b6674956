"""One Secrets Manager secret per ``blueprint.SECRETS`` entry.

The template declares the secret, never its value: CloudFormation fills it with a random
placeholder and the operator sets the real one out of band (docs/payments.md, "Keys"). The
functions get the secret's ARN in their environment and read it at run time (Powertools
Parameters, cached), if their blueprint grants ``ReadSecret``.
"""

from __future__ import annotations

from aws_cdk import RemovalPolicy, Tags
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

import blueprint

from .. import constants as c
from ..scanners import suppress

WHY_AWS_MANAGED_KEY = (
    "Keys (the payment provider's, the token-signing key), not runners' personal data: encrypted with Secrets "
    "Manager's AWS managed key; only functions granted ReadSecret may read them, every read is in CloudTrail."
)


class Secrets(Construct):
    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        self.by_id: dict[str, secretsmanager.Secret] = {}
        for decl in blueprint.SECRETS:
            secret = secretsmanager.Secret(
                self,
                decl.id,
                description=decl.description,
                # A placeholder until the operator puts the real value; never a real key here.
                generate_secret_string=secretsmanager.SecretStringGenerator(exclude_punctuation=True),
                # Deleting a stage must not throw away the keys an operator put in by hand.
                removal_policy=RemovalPolicy.RETAIN,
            )
            suppress(secret, "checkov", "CKV_AWS_149", WHY_AWS_MANAGED_KEY)
            Tags.of(secret).add(c.BLUEPRINT_TAG, decl.id)
            self.by_id[decl.id] = secret
