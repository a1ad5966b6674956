"""The Racecap stack: composes one construct per capability, every one of them driven by
the blueprint. Nothing here names a table, queue or function."""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput, Fn, Stack, Tags
from aws_cdk import aws_kms as kms
from constructs import Construct

import blueprint

from . import constants as c
from .constructs.auth import DirectorAuth
from .constructs.buckets import Buckets
from .constructs.cache import Cache
from .constructs.edge import EdgeStack, origin_secret
from .constructs.functions import Functions
from .constructs.http_api import HttpApi
from .constructs.monitoring import Monitoring
from .constructs.network import Network
from .constructs.queues import Queues
from .constructs.schedules import Schedules
from .constructs.secrets import Secrets
from .constructs.site import Site
from .constructs.smoke import SmokeDirector
from .constructs.state_machines import StateMachines
from .constructs.tables import Tables
from .constructs.triggers import QueueTriggers
from .grants import apply_grants
from .refs import RefResolver, Registry


class RacecapStack(Stack):
    edge: EdgeStack | None = None  # the us-east-1 stack with the web ACL (set by build_app)

    def __init__(self, scope: Construct, construct_id: str, *, web_acl_arn: str | None = None, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        Tags.of(self).add(c.APP_TAG, blueprint.APP_NAME)
        self.registry = reg = Registry()
        resolve = RefResolver(self, reg)

        self.network = Network(self, c.NETWORK_ID)
        self.cache = Cache(self, c.CACHE_ID, network=self.network)
        reg.cache_url = self.cache.url
        reg.origin_secret = self.origin_secret = origin_secret(self)
        # Guards runners' personal data at rest (blueprint ``personal_data`` tables and queues).
        self.personal_data_key = kms.Key(
            self,
            c.PERSONAL_DATA_KEY_ID,
            description="Racecap: runners' personal data in tables and queues",
            enable_key_rotation=True,
        )
        self.tables = Tables(self, c.TABLES_ID, personal_data_key=self.personal_data_key)
        reg.tables.update(self.tables.by_id)
        self.queues = Queues(self, c.QUEUES_ID, personal_data_key=self.personal_data_key)
        reg.queues.update(self.queues.by_id)
        reg.dead_letter_queues.update(self.queues.dead_letters)
        self.buckets = Buckets(self, c.BUCKETS_ID)
        reg.buckets.update(self.buckets.by_id)
        self.secrets = Secrets(self, c.SECRETS_ID)
        reg.secrets.update(self.secrets.by_id)
        self.functions = Functions(self, c.FUNCTIONS_ID, network=self.network, resolve=resolve)
        reg.functions.update(self.functions.by_id)
        self.state_machines = StateMachines(self, c.STATE_MACHINES_ID, resolve=resolve, registry=reg)
        reg.state_machines.update(self.state_machines.by_id)

        apply_grants(reg)
        self.triggers = QueueTriggers(self, c.TRIGGERS_ID, registry=reg)
        self.buckets.add_triggers(reg.functions)
        reg.dead_letter_queues.update(self.buckets.failures)
        self.schedules = Schedules(self, c.SCHEDULES_ID, functions=reg.functions)
        reg.dead_letter_queues.update(self.schedules.failures)
        self.auth = DirectorAuth(self, c.AUTH_ID)
        self.smoke = SmokeDirector(self, c.SMOKE_DIRECTOR_ID, user_pool=self.auth.user_pool, client=self.auth.client)
        self.http_api = HttpApi(
            self, c.HTTP_API_ID, functions=self.functions.entry_points, director_authorizer=self.auth.authorizer
        )
        uploads = next(b for b in blueprint.BUCKETS if b.browser_uploads)
        self.site = Site(
            self,
            c.SITE_ID,
            api=self.http_api.api,
            origin_secret=self.origin_secret,
            web_acl_arn=web_acl_arn,
            # The director's console: its admin/config.json and the origins its CSP allows.
            console_config={
                "region": self.region,
                "userPoolId": self.auth.user_pool.user_pool_id,
                "clientId": self.auth.client.user_pool_client_id,
                "endpoint": f"https://cognito-idp.{self.region}.{self.url_suffix}",
            },
            console_origins=blueprint.ConsoleOrigins.aws(
                self.region, uploads.aws_name(self.stack_name, self.account, self.region)
            ),
        )
        self.buckets.allow_uploads_from(self.site.url)
        self.monitoring = Monitoring(self, c.MONITORING_ID, registry=reg, api=self.http_api.api)

        CfnOutput(self, c.OUTPUT_SITE_URL, value=self.site.url)
        CfnOutput(self, c.OUTPUT_API_URL, value=self.http_api.api.api_endpoint)
        CfnOutput(self, c.OUTPUT_USER_POOL_ID, value=self.auth.user_pool.user_pool_id)
        CfnOutput(self, c.OUTPUT_USER_POOL_CLIENT_ID, value=self.auth.client.user_pool_client_id)
        CfnOutput(self, c.OUTPUT_SMOKE_SECRET, value=self.smoke.secret.secret_arn)
        CfnOutput(self, c.OUTPUT_SMOKE_RUNNER_POLICY, value=self.smoke.runner_policy.managed_policy_arn)
        CfnOutput(self, c.OUTPUT_SMOKE_ENROLLER_POLICY, value=self.smoke.enroller_policy.managed_policy_arn)
        CfnOutput(self, c.OUTPUT_ALARM_TOPIC, value=self.monitoring.topic.topic_arn)
        CfnOutput(self, c.OUTPUT_DASHBOARD, value=self.monitoring.dashboard.dashboard_name)
        # `python -m tools.audit --stage <this>`: the function whose configuration names the
        # stage's tables, queues and payment secret (tools/stage.py).
        CfnOutput(self, c.OUTPUT_AUDIT_FUNCTION, value=self.functions.by_id[blueprint.AUDIT_FUNCTION].function_name)

    @property
    def availability_zones(self) -> list[str]:
        # The region's first two AZs resolved by CloudFormation (Fn::GetAZs) rather than a
        # context lookup: synth needs no AWS credentials and names no zone.
        return [Fn.select(i, Fn.get_azs(self.region)) for i in range(2)]
