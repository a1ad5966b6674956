"""Routers imported by the first request that needs them (issue 38's cold starts).

The admin API has nine capabilities' routers; a director's first request (the race list, a
race's page) needs one of them, but importing all nine builds every capability's models at
cold start. Here a request's path names its capability (``pick``), whose router is imported and
included then; the others stay unimported until a request needs them. Included in any order,
the routes still match as before: no two capabilities' patterns can match one path (a test
checks every route's path picks its own router). Should ``pick`` ever name the wrong one, the
request finds no route among those loaded, and every router is included before it is resolved.
``everything()`` includes all of them (the OpenAPI document is built from the whole app).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver


class LazyRouters:
    def __init__(self, app: APIGatewayHttpResolver, package: str, order: Sequence[str], pick: Callable[[str], str]):
        self._app = app
        self._package = package
        self._order = tuple(order)  # the order they were always included in (everything())
        self._pick = pick
        self.loaded: list[str] = []

    def include(self, name: str) -> None:
        if name not in self.loaded:
            self._app.include_router(importlib.import_module(f"{self._package}.{name}").router)
            self.loaded.append(name)

    def everything(self) -> None:
        for name in self._order:
            self.include(name)

    def ensure(self, method: str, path: str) -> None:
        """The router ``path`` needs, loaded; all of them if it still finds no route."""
        self.include(self._pick(path))
        if not self._routed(method, path):
            self.everything()

    def _routed(self, method: str, path: str) -> bool:
        routes = self._app._static_routes + self._app._dynamic_routes
        return any(r.rule.fullmatch(path) and r.method.upper() == method.upper() for r in routes)
