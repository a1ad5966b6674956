"""The stage's smoke director (``make smoke``): one user of the directors' pool and one secret
holding its sign-in, plus the two managed policies an operator attaches to run or set it up.

The template creates the user (no invitation mail) and the secret (username, pool, app client
and a generated password that meets the pool's policy); ``python -m tools.smoke enroll``
makes that password permanent and adds the TOTP seed once after the deploy. The user signs
in like any director: SRP, then a TOTP code. It owns only the races it creates.
"""

from __future__ import annotations

from aws_cdk import RemovalPolicy, Stack
from aws_cdk import aws_cognito as cognito
from aws_cdk import aws_iam as iam
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

import blueprint

from .. import constants as c
from ..scanners import suppress
from .secrets import WHY_AWS_MANAGED_KEY


class SmokeDirector(Construct):
    def __init__(
        self, scope: Construct, construct_id: str, *, user_pool: cognito.UserPool, client: cognito.UserPoolClient
    ) -> None:
        super().__init__(scope, construct_id)
        decl = blueprint.SMOKE_DIRECTOR
        self.user = cognito.CfnUserPoolUser(
            self,
            c.SMOKE_USER_ID,
            user_pool_id=user_pool.user_pool_id,
            username=decl.username,
            user_attributes=[
                cognito.CfnUserPoolUser.AttributeTypeProperty(name="email", value=decl.username),
                cognito.CfnUserPoolUser.AttributeTypeProperty(name="email_verified", value="true"),
            ],
            message_action="SUPPRESS",  # nobody reads that mailbox; the password is in the secret
        )
        template = Stack.of(self).to_json_string(
            {"username": decl.username, "userPoolId": user_pool.user_pool_id, "clientId": client.user_pool_client_id}
        )
        self.secret = secretsmanager.Secret(
            self,
            c.SMOKE_SECRET_ID,
            description="Racecap: the smoke director's sign-in (password generated here, TOTP seed added by enroll)",
            generate_secret_string=secretsmanager.SecretStringGenerator(
                secret_string_template=template,
                generate_string_key="password",
                password_length=32,
                require_each_included_type=True,  # the pool wants upper, lower, digit and symbol
                exclude_characters="\"'\\/@`",
            ),
            removal_policy=RemovalPolicy.DESTROY,  # nothing in it outlives the stage's user pool
        )
        suppress(self.secret, "checkov", "CKV_AWS_149", WHY_AWS_MANAGED_KEY)
        # Running the smoke test needs only the secret: SRP and TOTP are the public client's calls.
        self.runner_policy = iam.ManagedPolicy(
            self,
            c.SMOKE_RUNNER_POLICY_ID,
            description="Racecap: run `make smoke` (read the smoke director's secret, nothing else)",
            statements=[
                iam.PolicyStatement(actions=["secretsmanager:GetSecretValue"], resources=[self.secret.secret_arn])
            ],
        )
        # Setting it up once: the permanent password and the TOTP seed, for this user pool only.
        self.enroller_policy = iam.ManagedPolicy(
            self,
            c.SMOKE_ENROLLER_POLICY_ID,
            description="Racecap: `python -m tools.smoke enroll` (the smoke director's password and TOTP seed)",
            statements=[
                iam.PolicyStatement(
                    actions=["secretsmanager:GetSecretValue", "secretsmanager:PutSecretValue"],
                    resources=[self.secret.secret_arn],
                ),
                iam.PolicyStatement(actions=["cognito-idp:AdminSetUserPassword"], resources=[user_pool.user_pool_arn]),
            ],
        )
