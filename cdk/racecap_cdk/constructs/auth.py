"""Race directors sign in through a Cognito user pool; admin routes (``auth ==
"director"`` in the blueprint) carry a JWT authorizer for it. The local stack runs a
local issuer with the same claims."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_apigatewayv2_authorizers as authorizers
from aws_cdk import aws_cognito as cognito
from constructs import Construct

from .. import constants as c


class DirectorAuth(Construct):
    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        self.user_pool = cognito.UserPool(
            self,
            c.USER_POOL_ID,
            self_sign_up_enabled=False,  # directors are invited, not self-registered
            sign_in_aliases=cognito.SignInAliases(email=True),
            sign_in_case_sensitive=False,
            auto_verify=cognito.AutoVerifiedAttrs(email=True),
            account_recovery=cognito.AccountRecovery.EMAIL_ONLY,
            password_policy=cognito.PasswordPolicy(
                min_length=12,
                require_lowercase=True,
                require_uppercase=True,
                require_digits=True,
                require_symbols=True,
            ),
            # Directors can cancel and refund: TOTP MFA, no SMS (no SNS role, no SMS bill).
            mfa=cognito.Mfa.REQUIRED,
            mfa_second_factor=cognito.MfaSecondFactor(otp=True, sms=False),
            # A handful of accounts: threat protection costs cents and guards refunds.
            feature_plan=cognito.FeaturePlan.PLUS,
            standard_threat_protection_mode=cognito.StandardThreatProtectionMode.FULL_FUNCTION,
            removal_policy=RemovalPolicy.RETAIN,
        )
        self.client = self.user_pool.add_client(
            c.USER_POOL_CLIENT_ID,
            generate_secret=False,  # the admin pages are a public client
            auth_flows=cognito.AuthFlow(user_srp=True),
            prevent_user_existence_errors=True,
        )
        self.authorizer = authorizers.HttpUserPoolAuthorizer(
            c.AUTHORIZER_ID, self.user_pool, user_pool_clients=[self.client]
        )
