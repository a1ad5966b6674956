"""AdminApi: placeholder while the routes are built."""
