"""Where ``make run``'s stack says it is running: ``.local-stack/run/stack.json``.

The stack writes the file; ``make token``, ``make director``/``make totp`` and ``make smoke`` read
it. Its own module, so the readers need not import ``local.stack`` (which imports them).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import blueprint

RUN_DIR = blueprint.ROOT / ".local-stack" / "run"


def running_stack(work_dir: Path) -> dict[str, Any] | None:
    """What a running ``make run`` stack wrote about itself (stack.json), or None."""
    info_file = work_dir / "stack.json"
    if not info_file.exists():
        return None
    info = json.loads(info_file.read_text())
    try:
        os.kill(int(info["pid"]), 0)
    except (OSError, ValueError, KeyError):
        return None
    return info
