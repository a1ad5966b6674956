"""The Racecap CDK app: ``build_app()`` is what ``cdk/app.py``, the infra tests and the idle-cost bench run."""

from __future__ import annotations

import json
import os
from typing import Any

from aws_cdk import App, Environment, Validations
from cdk_nag import AwsSolutionsChecks

from . import constants as c
from .constructs.edge import EdgeStack
from .nag import add_acknowledgments
from .scanners import suppress_cdk_internals
from .stack import RacecapStack


def feature_flags() -> dict[str, Any]:
    """cdk.json's context, so ``python cdk/app.py`` and the tests synth what ``cdk synth`` does."""
    context: dict[str, Any] = json.loads(c.CDK_JSON.read_text()).get("context", {})
    return context


def build_app(outdir: str | None = None, *, nag: bool = True, **context: Any) -> tuple[App, RacecapStack]:
    app = App(outdir=outdir, context={**feature_flags(), **context})
    env = Environment(
        account=os.environ.get("CDK_DEFAULT_ACCOUNT", c.DUMMY_ACCOUNT),
        region=os.environ.get("CDK_DEFAULT_REGION", c.DEFAULT_REGION),
    )
    cidrs = app.node.try_get_context(c.LOAD_GENERATOR_CONTEXT) or ""
    edge = EdgeStack(
        app,
        c.EDGE_STACK_ID,
        load_generator_cidrs=[x.strip() for x in str(cidrs).split(",") if x.strip()],
        env=Environment(account=env.account, region=c.EDGE_REGION),
        description="Racecap edge: the CloudFront web ACL (us-east-1 whatever the stage's region)",
    )
    stack = RacecapStack(
        app,
        c.STACK_ID,
        web_acl_arn=edge.web_acl.attr_arn,
        env=env,
        description="Racecap: burst-proof race registration",
        # The web ACL lives in us-east-1; a stage elsewhere reads its ARN across regions.
        cross_region_references=env.region != c.EDGE_REGION,
    )
    stack.edge = edge
    add_acknowledgments(stack)
    suppress_cdk_internals(stack, stack.buckets.by_id.values())
    if nag:
        Validations.of(app).add_plugins(AwsSolutionsChecks(app, verbose=True))
    return app, stack
