"""The HTTP service on Ray Serve (see `api.py` for the routes, `deployment.py` for Serve)."""
