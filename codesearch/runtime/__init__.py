"""The Ray layer: a thin shell of actors around the engine (see each module).

Named actors (searchers, the scheduler) live in the Ray namespace `NAMESPACE`, so any driver
attached to the cluster — a Serve replica, `codesearch serve`, a notebook — finds them by name
whatever namespace it runs in.
"""

NAMESPACE = "codesearch"
