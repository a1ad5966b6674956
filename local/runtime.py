"""A Lambda-like runtime for the local stack: loads the *same* handler modules the CDK
app deploys, with the layer on ``sys.path`` as ``/opt/python`` is on AWS, and invokes
them with a Lambda context.

One process can host several functions; each function's module is imported once per
process, so module-level state (clients, the in-process cache tier) behaves like one
warm execution environment per worker, as on Lambda.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import blueprint

LAYER_PATH = str(blueprint.ROOT / "layers" / "racecap" / "python")
REGION = "us-east-1"
ACCOUNT = "000000000000"


def install_layer_path() -> None:
    if LAYER_PATH not in sys.path:
        sys.path.insert(0, LAYER_PATH)


@dataclass
class LambdaContext:
    """The attributes Powertools and handlers read from the real Lambda context."""

    function_name: str
    memory_limit_in_mb: int
    timeout_s: int
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    function_version: str = "$LATEST"
    _deadline: float = 0.0

    def __post_init__(self) -> None:
        self._deadline = time.monotonic() + self.timeout_s
        self.invoked_function_arn = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{self.function_name}"
        self.log_group_name = f"/aws/lambda/{self.function_name}"
        self.log_stream_name = f"local/{os.getpid()}"

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


class FunctionHost:
    """Imports function handlers lazily (cold start on first use) and invokes them."""

    def __init__(self) -> None:
        install_layer_path()
        self._modules: dict[str, ModuleType] = {}
        self._lock = threading.Lock()

    def module(self, function_id: str) -> ModuleType:
        module = self._modules.get(function_id)
        if module is None:
            with self._lock:
                module = self._modules.get(function_id) or self._load(blueprint.function(function_id))
                self._modules[function_id] = module
        return module

    def handler(self, function_id: str) -> Any:
        return getattr(self.module(function_id), blueprint.function(function_id).attr)

    @staticmethod
    def _load(fn: blueprint.Function) -> ModuleType:
        path = fn.path / f"{fn.module.replace('.', '/')}.py"
        # A unique module name per function: every function's entry file is handler.py.
        name = f"racecap_fn_{fn.id}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module

    def invoke(self, function_id: str, event: Any) -> Any:
        fn = blueprint.function(function_id)
        ctx = LambdaContext(fn.id, fn.memory_mb, fn.timeout_s)
        return self.handler(function_id)(event, ctx)
