"""The Racecap CDK app: ``build_app()`` is what ``cdk/app.py`` and the infra tests run."""

from __future__ import annotations

import json
import os
from typing import Any

from aws_cdk import App, Environment, Validations
from cdk_nag import AwsSolutionsChecks

from . import constants as c
from .nag import add_acknowledgments
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
    stack = RacecapStack(app, c.STACK_ID, env=env, description="Racecap: burst-proof race registration")
    add_acknowledgments(stack)
    if nag:
        Validations.of(app).add_plugins(AwsSolutionsChecks(app, verbose=True))
    return app, stack
