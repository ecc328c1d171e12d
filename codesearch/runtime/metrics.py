"""codesearch's metrics, through Ray's metrics API (`ray.util.metrics`).

Why Ray's API and not a Prometheus client of our own: every Ray process already reports its
metrics to the metrics agent of its node, which serves them in Prometheus' text format on the
node's metrics export port (``ray.nodes()[i]["MetricsExportPort"]``) and feeds the Ray
dashboard. So the service needs no port, endpoint or exporter of its own. Ray exports each
metric with the prefix ``ray_`` (``codesearch_http_request_seconds`` is scraped as
``ray_codesearch_http_request_seconds_bucket`` …, a counter gets the suffix ``_total``), and adds
its own tags (``SessionName``, ``NodeAddress``, ``WorkerId``, …) to ours. ``docs/metrics.md`` lists
every metric; ``docs/grafana-dashboard.json`` charts them.

=====================================  =========  =================  ==================================
name                                   type       tags               recorded by
=====================================  =========  =================  ==================================
codesearch_http_requests               counter    route method       `middleware.observability` (every
                                                  status             HTTP response of the API)
codesearch_http_request_seconds        histogram  route method       idem, until the last byte of the
                                                  status             response (streams included)
codesearch_searcher_query_seconds      histogram  origin             `ShardSearcher.search`
codesearch_searcher_candidate_files    counter    origin             idem (stats ``ngramMatches``)
codesearch_searcher_verified_bytes     counter    origin             idem (stats ``contentBytesLoaded``)
codesearch_searcher_shards             gauge      origin             `ShardSearcher.set_shards`
codesearch_searcher_shard_bytes        gauge      origin             idem
codesearch_jobs_queued                 gauge      kind               `Scheduler.tick` (from the store)
codesearch_jobs_running                gauge      kind               idem
codesearch_jobs_finished               counter    kind outcome       the job workers
codesearch_job_seconds                 histogram  kind outcome       idem
codesearch_mirror_fetch_errors         counter    host               `RepoIndexer` (clone or fetch)
codesearch_index_refused_shards        gauge                         `integrity.IndexIntegrity` (the
                                                                     scheduler, each tick)
codesearch_index_shard_refusals        counter    reason             idem, when a shard is refused
=====================================  =========  =================  ==================================

Tags: ``route`` is a route template (``/api/search``, ``/chat/{chat_id}``), ``unmatched`` for a
path no route serves, so that the number of series stays bounded whatever clients ask for;
``origin`` is a searcher's partition (copies of one partition are told apart by Ray's
``WorkerId``); ``kind`` is ``sync`` or ``index``; ``outcome`` is ``completed``, ``failed``
(the attempt failed or timed out; the store may retry it) or ``abandoned`` (the job was taken
back from the worker); ``host`` is the connection type (``github``, ``gitlab``, ``git`` …).

Metric objects belong to one process: they are made on first use in each process (a Serve
replica, a searcher, a worker), never pickled. Outside Ray (a test calling `ShardSearcher`
directly, a CLI without Ray) recording does nothing: Ray's metric classes need a connected
worker. A failure to record is logged once per metric and never reaches the caller: a search or
a job must not fail because its metrics could not be written.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from codesearch.search.options import Stats

log = logging.getLogger(__name__)

#: Bucket boundaries (seconds) of request and query latencies: 5 ms to one minute.
LATENCY_BUCKETS_S = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0]
#: Bucket boundaries (seconds) of job durations: a second to two hours (``repoIndexTimeoutMs``).
JOB_BUCKETS_S = [1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0]

JOB_OUTCOMES = ("completed", "failed", "abandoned")

# name → (Ray class name, description, tag keys, bucket boundaries or None)
SPECS: dict[str, tuple[str, str, tuple[str, ...], list[float] | None]] = {
    "codesearch_http_requests": (
        "Counter",
        "HTTP requests answered by the API, by route template, method and status code.",
        ("route", "method", "status"),
        None,
    ),
    "codesearch_http_request_seconds": (
        "Histogram",
        "Seconds from a request's arrival to the last byte of its response.",
        ("route", "method", "status"),
        LATENCY_BUCKETS_S,
    ),
    "codesearch_searcher_query_seconds": (
        "Histogram",
        "Seconds one searcher took to answer one search over its shards.",
        ("origin",),
        LATENCY_BUCKETS_S,
    ),
    "codesearch_searcher_candidate_files": (
        "Counter",
        "Candidate files the trigram index gave a searcher's searches (stats ngramMatches).",
        ("origin",),
        None,
    ),
    "codesearch_searcher_verified_bytes": (
        "Counter",
        "Bytes of file content a searcher read to verify candidates (stats contentBytesLoaded).",
        ("origin",),
        None,
    ),
    "codesearch_searcher_shards": ("Gauge", "Shards a searcher holds in its newest shard list.", ("origin",), None),
    "codesearch_searcher_shard_bytes": (
        "Gauge",
        "Bytes of the shard files a searcher holds in its newest shard list.",
        ("origin",),
        None,
    ),
    "codesearch_jobs_queued": (
        "Gauge",
        "Sync or index jobs waiting for a worker (PENDING), as the scheduler saw at its last tick.",
        ("kind",),
        None,
    ),
    "codesearch_jobs_running": (
        "Gauge",
        "Sync or index jobs a worker holds (IN_PROGRESS), as the scheduler saw at its last tick.",
        ("kind",),
        None,
    ),
    "codesearch_jobs_finished": (
        "Counter",
        "Job attempts a worker finished, by kind and outcome (completed, failed, abandoned).",
        ("kind", "outcome"),
        None,
    ),
    "codesearch_job_seconds": (
        "Histogram",
        "Seconds a job attempt ran on its worker, by kind and outcome.",
        ("kind", "outcome"),
        JOB_BUCKETS_S,
    ),
    "codesearch_mirror_fetch_errors": (
        "Counter",
        "Clones or fetches of a repository mirror that failed, by connection type.",
        ("host",),
        None,
    ),
    "codesearch_index_refused_shards": (
        "Gauge",
        "Shards of the index the scheduler refused (checksum, truncated, missing) and not yet rebuilt.",
        (),
        None,
    ),
    "codesearch_index_shard_refusals": (
        "Counter",
        "Shards of the index refused, by reason (checksum, truncated, missing, invalid).",
        ("reason",),
        None,
    ),
}

_lock = threading.Lock()
_made: dict[str, object] = {}
_failed: set[str] = set()  # metrics whose recording failed once (logged once)


def ray_ready() -> bool:
    """Whether this process is connected to Ray (a driver after `ray.init`, or a worker). Ray
    is not imported for the question: a process that never imported it is not connected."""
    ray = sys.modules.get("ray")
    return ray is not None and ray.is_initialized()


def _metric(name: str) -> object | None:
    """The metric `name` of this process, made on first use; None outside Ray."""
    metric = _made.get(name)
    if metric is not None:
        return metric
    if not ray_ready():
        return None
    with _lock:
        if name not in _made:
            from ray.util import metrics as ray_metrics

            kind, description, tag_keys, boundaries = SPECS[name]
            cls = getattr(ray_metrics, kind)
            extra = {"boundaries": boundaries} if boundaries is not None else {}
            _made[name] = cls(name, description=description, tag_keys=tag_keys, **extra)
        return _made[name]


def _record(name: str, method: str, value: float, tags: dict[str, str]) -> None:
    try:
        metric = _metric(name)
        if metric is not None:
            getattr(metric, method)(value, tags=tags)
    except Exception as e:  # noqa: BLE001 - metrics must never fail the work they describe
        if name not in _failed:
            _failed.add(name)
            log.warning("metric %s not recorded: %s: %s", name, type(e).__name__, e)


def inc(name: str, value: float = 1, **tags: str) -> None:
    """Add `value` to counter `name` (nothing for a value of 0: Ray's counters refuse it)."""
    if value > 0:
        _record(name, "inc", value, tags)


def observe(name: str, value: float, **tags: str) -> None:
    """Record `value` in histogram `name`."""
    _record(name, "observe", max(0.0, value), tags)


def set_gauge(name: str, value: float, **tags: str) -> None:
    """Set gauge `name` to `value`."""
    _record(name, "set", value, tags)


# ---------------------------------------------------------------- what each layer records


def http_request(route: str, method: str, status: int | str, seconds: float) -> None:
    tags = {"route": route, "method": method, "status": str(status)}
    inc("codesearch_http_requests", 1, **tags)
    observe("codesearch_http_request_seconds", seconds, **tags)


def searcher_query(origin: int, seconds: float, stats: Stats) -> None:
    """One search of one searcher: its time and what its `Stats` say it examined."""
    o = str(origin)
    observe("codesearch_searcher_query_seconds", seconds, origin=o)
    inc("codesearch_searcher_candidate_files", stats.ngramMatches, origin=o)
    inc("codesearch_searcher_verified_bytes", stats.contentBytesLoaded, origin=o)


def searcher_shards(origin: int, count: int, nbytes: int) -> None:
    o = str(origin)
    set_gauge("codesearch_searcher_shards", count, origin=o)
    set_gauge("codesearch_searcher_shard_bytes", nbytes, origin=o)


def job_queue(queued: dict[str, int], running: dict[str, int], kinds: Iterable[str]) -> None:
    """The queue as the store holds it now: jobs waiting and running per kind (0 for a kind
    without any, so a gauge falls back to 0 when its queue empties)."""
    for kind in kinds:
        set_gauge("codesearch_jobs_queued", queued.get(kind, 0), kind=kind)
        set_gauge("codesearch_jobs_running", running.get(kind, 0), kind=kind)


def job_finished(kind: str, outcome: str, seconds: float) -> None:
    if outcome not in JOB_OUTCOMES:
        raise ValueError(f"unknown job outcome {outcome!r} (one of {', '.join(JOB_OUTCOMES)})")
    inc("codesearch_jobs_finished", kind=kind, outcome=outcome)
    observe("codesearch_job_seconds", seconds, kind=kind, outcome=outcome)


def mirror_fetch_error(host: str) -> None:
    inc("codesearch_mirror_fetch_errors", host=host or "git")
