"""Loaded at interpreter start-up when this folder is first on PYTHONPATH (``make bench``
puts it there for the gateway and pollers). Counts AWS calls only if the bench asked for
it; otherwise it does nothing. See ``tools/awscalls.py``."""

import os

if os.environ.get("RACECAP_AWS_CALLS_DIR"):
    from tools import awscalls

    awscalls.install(os.environ["RACECAP_AWS_CALLS_DIR"])
