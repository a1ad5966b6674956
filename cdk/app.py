"""CDK entry point (``cdk synth`` via cdk.json, or ``.venv/bin/python cdk/app.py``).

Synthesizes the Racecap stack from the blueprint, with cdk-nag's AWS Solutions checks:
an unsuppressed error fails the synth.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

# The CDK's embedded Node runtime warns loudly about Node 20 on every call.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
ROOT = Path(__file__).resolve().parent.parent
for path in (ROOT, ROOT / "cdk"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from racecap_cdk.app import build_app  # noqa: E402


def main() -> None:
    # The CLI chooses the output directory; run directly, synth to ./cdk.out like it would.
    app, _ = build_app(None if "CDK_OUTDIR" in os.environ else str(ROOT / "cdk.out"))
    app.synth()


if __name__ == "__main__":
    main()
