"""The edge: the HTTP APIs' routes, one Powertools ``Router`` per capability.

``admin/`` is the race directors' API (``functions/admin_api``), ``runner/`` the runners'
(``functions/registration_api``). Each handler includes its routers in the order the routes
were always registered, so the OpenAPI document and the matching of overlapping patterns stay
as they were. The routers live in the layer, not beside ``handler.py``: the local runtime loads
each handler under a unique name per environment, and a sibling package would be shared under
one global name by every function in the process.
"""
