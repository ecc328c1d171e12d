"""The Ray runtime: scheduler, workers, searchers, clusters, metrics."""
