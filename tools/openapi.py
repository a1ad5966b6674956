"""Generate the one OpenAPI document from the API functions' own routes and models.

    python -m tools.openapi           # write functions/public_api/openapi.json
    python -m tools.openapi --check   # fail if the committed document is stale (CI)

Each API function has its own Powertools resolver; Powertools' OpenAPIMerge joins them.
The document is committed and served by PublicApi at /api/openapi.json and /api/docs.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import sys
from pathlib import Path

import blueprint
from local.runtime import FunctionHost

OUT = blueprint.ROOT / "functions" / "public_api" / "openapi.json"
DESCRIPTION = (
    'Burst-proof race registration. Errors are always `{"error": CODE, "message": sentence}` '
    "(plus `fields` on VALIDATION_ERROR). Places left on race pages are cached for ~2 s."
)


def api_functions() -> list[str]:
    return sorted({r.function for r in blueprint.ROUTES})


def build() -> str:
    from aws_lambda_powertools.event_handler.openapi.merge import OpenAPIMerge
    from aws_lambda_powertools.event_handler.openapi.models import Server

    from local.stack import LocalStack

    # Handlers validate their environment at import; any well-formed values will do here.
    os.environ.update(LocalStack(Path("/nonexistent")).function_env())
    host = FunctionHost()
    merge = OpenAPIMerge(
        title="Racecap API",
        version="1.0.0",
        description=DESCRIPTION,
        servers=[Server(url="/")],
        security_schemes=_security_schemes(),
        on_conflict="error",
    )
    for fn in api_functions():
        app = host.module(fn).app
        schema = app.get_openapi_schema(title="Racecap API", version="1.0.0", security_schemes=_security_schemes())
        merge.add_schema(schema)
    return json.dumps(json.loads(merge.get_openapi_json_schema()), indent=2, sort_keys=True) + "\n"


def _security_schemes() -> dict:
    from aws_lambda_powertools.event_handler.openapi.models import HTTPBearer

    # Cognito on AWS, the local issuer on the local stack: both are bearer JWTs.
    return {"director": HTTPBearer(scheme="bearer", bearerFormat="JWT")}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    doc = build()
    if args.check:
        current = OUT.read_text() if OUT.exists() else ""
        if current != doc:
            diff = difflib.unified_diff(current.splitlines(), doc.splitlines(), "committed", "generated", lineterm="")
            print("\n".join(list(diff)[:60]))
            sys.exit("openapi.json is stale: run `make openapi` and commit it")
        print("openapi.json is up to date")
        return
    OUT.write_text(doc)
    print(f"wrote {OUT.relative_to(blueprint.ROOT)}")


if __name__ == "__main__":
    main()
