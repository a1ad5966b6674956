"""In-memory stand-ins for the ports in ``racecap.dal``, for unit tests of the layers above."""
