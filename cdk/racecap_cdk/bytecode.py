"""Bytecode compiled for Lambda's Python, shipped in every code asset (functions and layers).

Lambda's ``/var/task`` and ``/opt`` are read-only: a package that ships sources only is
compiled module by module on every cold start, and the result is thrown away with the
environment. ``make bench`` (e) measures both: each handler's import with the packages'
bytecode, and without it (as this stack shipped before, the asset excludes dropping the
``__pycache__`` folders that pip wrote for the wrong Python anyway).

Bytecode is specific to a Python minor version, so it is compiled by an interpreter of the
runtime's version (``constants.PYTHON_RUNTIME``), found here, when CDK stages each asset
(the dependencies layer that ``make layers`` installs included).
"""

from __future__ import annotations

import functools
import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsii
from aws_cdk import BundlingOptions, DockerImage, ILocalBundling
from aws_cdk import aws_lambda as lambda_

from . import constants as c

RUNTIME_VERSION = c.PYTHON_RUNTIME.removeprefix("python")  # "3.12"
# The cache tag in a compiled module's file name, e.g. racecap/__pycache__/http.cpython-312.pyc
CACHE_TAG = "cpython-" + RUNTIME_VERSION.replace(".", "")
# A .pyc that records its source's hash and is used without checking it (PEP 552). The
# asset zip does not keep the sources' modification times, so the default (timestamp)
# .pyc files would all look stale and be recompiled, unsaved, at every cold start; and a
# deployed package never changes under its bytecode.
INVALIDATION_MODE = "unchecked-hash"
# CDK's bundling API wants an image; it is used only if local bundling declines, which
# it never does (see _CompileLocally). AWS SAM's build image of the same runtime.
BUILD_IMAGE = f"public.ecr.aws/sam/build-{c.PYTHON_RUNTIME}"


@functools.cache  # one probe per synth, not one per asset
def runtime_python() -> str | None:
    """An interpreter of Lambda's Python version: ``$RACECAP_LAMBDA_PYTHON``, ``python3.12``
    on the PATH, or one installed by pyenv (whose shim refuses a version that is not active)."""
    pattern = os.path.expanduser(f"~/.pyenv/versions/{RUNTIME_VERSION}.*/bin/python{RUNTIME_VERSION}")
    candidates = [
        os.environ.get("RACECAP_LAMBDA_PYTHON"),
        shutil.which(f"python{RUNTIME_VERSION}"),
        *sorted(glob.glob(pattern), reverse=True),
    ]
    probe = "import sys; print('%d.%d' % sys.version_info[:2])"
    for exe in filter(None, candidates):
        try:
            proc = subprocess.run([exe, "-c", probe], capture_output=True, text=True, timeout=60, check=False)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if proc.returncode == 0 and proc.stdout.strip() == RUNTIME_VERSION:
            return exe
    return None


def compile_tree(root: Path, python: str) -> None:
    """Compile every module under ``root`` in place (``__pycache__`` beside each source)."""
    cmd = [python, "-m", "compileall", "-q", "-j", "0", "--invalidation-mode", INVALIDATION_MODE, str(root)]
    # A cache prefix (the Makefile sets one for the local stack) would send the files there.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPYCACHEPREFIX", "PYTHONDONTWRITEBYTECODE")}
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)


@jsii.implements(ILocalBundling)
class _CompileLocally:
    """Copy an asset's sources and compile them for the runtime, without Docker."""

    def __init__(self, source: Path) -> None:
        self._source = source

    # The bundling options arrive as one struct or as keywords, depending on the caller;
    # nothing in them matters here.
    def try_bundle(self, output_dir: str, options: Any = None, **_: Any) -> bool:
        shutil.copytree(self._source, output_dir, dirs_exist_ok=True, ignore=shutil.ignore_patterns(*c.ASSET_EXCLUDES))
        python = runtime_python()
        if python is None:
            # Synth keeps working anywhere (tests, a laptop without that Python); what ships
            # is then sources only, slower to start but the same code.
            print(
                f"[bytecode] no Python {RUNTIME_VERSION} found (set RACECAP_LAMBDA_PYTHON): "
                f"{self._source.name} ships without bytecode",
                file=sys.stderr,
            )
        else:
            compile_tree(Path(output_dir), python)
        return True


def code_asset(path: str | Path) -> lambda_.Code:
    """A function's or layer's code: its sources plus their bytecode for Lambda's Python."""
    source = Path(path)
    return lambda_.Code.from_asset(
        str(source),
        exclude=c.ASSET_EXCLUDES,
        bundling=BundlingOptions(image=DockerImage.from_registry(BUILD_IMAGE), local=_CompileLocally(source)),
    )
