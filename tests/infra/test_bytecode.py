"""Every code asset ships bytecode for Lambda's Python (racecap_cdk.bytecode), so a cold
start loads modules instead of compiling them on a read-only file system."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from aws_cdk import App, Stack
from aws_cdk import aws_lambda as lambda_
from racecap_cdk import bytecode
from racecap_cdk import constants as c

UNCHECKED_HASH = 0b01  # PEP 552 flags: hash-based, source not checked


@pytest.fixture(scope="module")
def runtime_python() -> str:
    python = bytecode.runtime_python()
    if python is None:
        pytest.skip(f"no Python {bytecode.RUNTIME_VERSION} on this machine (RACECAP_LAMBDA_PYTHON)")
    return python


@pytest.fixture(scope="module")
def staged_layer(runtime_python: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    outdir = tmp_path_factory.mktemp("cdk.out")
    app = App(outdir=str(outdir))
    lambda_.LayerVersion(Stack(app, "Bytecode"), "Layer", code=bytecode.code_asset(c.PROJECT_LAYER_DIR))
    app.synth()
    staged = [d for d in outdir.glob("asset.*") if d.is_dir()]
    assert len(staged) == 1
    return staged[0]


def test_given_the_project_layer_when_staged_then_every_module_has_unchecked_hash_bytecode_for_the_runtime(
    runtime_python: str, staged_layer: Path
) -> None:
    magic = subprocess.run(
        [runtime_python, "-c", "import importlib.util, sys; sys.stdout.write(importlib.util.MAGIC_NUMBER.hex())"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    sources = sorted(staged_layer.rglob("*.py"))
    assert len(sources) > 20
    for source in sources:
        header = (source.parent / "__pycache__" / f"{source.stem}.{bytecode.CACHE_TAG}.pyc").read_bytes()[:8]
        assert header[:4].hex() == magic, source
        assert int.from_bytes(header[4:8], "little") == UNCHECKED_HASH, source
    # Only the runtime's bytecode: nothing the source tree's own interpreter left behind.
    assert {p.name.split(".")[-2] for p in staged_layer.rglob("*.pyc")} == {bytecode.CACHE_TAG}


def test_given_a_staged_module_when_its_source_no_longer_compiles_then_the_runtime_still_imports_its_bytecode(
    runtime_python: str, staged_layer: Path, tmp_path: Path
) -> None:
    # The asset zip resets the sources' modification times; the bytecode must be used
    # without comparing it with its source, or every cold start would compile anyway.
    copy = tmp_path / "layer"
    shutil.copytree(staged_layer, copy)
    (copy / "python" / "racecap" / "errors.py").write_text("this is not python\n")
    proc = subprocess.run(
        [runtime_python, "-B", "-c", "import racecap.errors as m; print(m.__name__)"],
        cwd=tmp_path,
        env={"PYTHONPATH": str(copy / "python")},
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "racecap.errors"
