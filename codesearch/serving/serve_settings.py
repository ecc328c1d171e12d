"""How codesearch runs Ray Serve so that a request costs little besides its search.

Measured with ``bench/bench_http_path.py`` on the offline demo (2 cores): with Serve's defaults,
``GET /api/health``, whose handler takes 0.5 ms, cost about 11 ms of CPU time per request, 6 in
Serve's HTTP proxy and 5 in the replica, before any search. What that time buys and what we
change (each measured; the numbers are in bench/RESULTS.md):

* **Proxy to replica over gRPC** (``RAY_SERVE_PROXY_USE_GRPC=1``, read by the proxy): the
  request goes to the replica's gRPC server (every replica runs one) instead of as a Ray actor
  task, whose submission and streamed answer cost the proxy and the replica more.
* **The proxy's router on the proxy's event loop** (``RAY_SERVE_RUN_ROUTER_IN_SEPARATE_LOOP=0``)
  and **the app on the replica's event loop** (``RAY_SERVE_RUN_USER_CODE_IN_SEPARATE_THREAD=0``):
  no hop between two threads for every request and every ASGI message. The app may share the
  loop Serve's own control calls (health checks, metrics) use because it never blocks it:
  store reads, long query plans and sync routes run in threads.
* **No access log line per request** (``enable_access_log``: off unless
  ``SOURCEBOT_LOG_LEVEL=debug``): Serve formats it and writes it to a file and to the process's
  stderr, which Ray's log monitor then reads again; our own log says what goes wrong.
* **A request's messages fetched only when the app asks** (`codesearch.serving.lazy_receive`, not
  a setting: a change to Serve's `ASGIReceiveProxy` in the replica): a search whose body came
  ahead (`proxy_body.BodyAhead`) makes no call back to the proxy.
* **No forwarded header believed by the proxy** (``FORWARDED_ALLOW_IPS=none``, read by the
  proxy's uvicorn): the replica sees the client's real TCP address and decides itself which
  proxies' ``X-Forwarded-For`` to believe (`codesearch.forwarded`). Not a speed setting:
  the sign-in lock-outs count failures per address, which the header must not let a client choose.

* **A dead proxy replaced in seconds** (``RAY_SERVE_PROXY_HEALTH_CHECK_PERIOD_S=2``, read by Serve's
  controller): the controller replaces a proxy after three failed health checks in a row; at
  Serve's default period (10 s) a proxy killed by the kernel left the HTTP port closed for 35-45 s,
  at 2 s for under 15 (`tests/runtime/test_process_deaths.py`, docs/operations.md). A health
  check is one small call to each proxy.

* **The GCS's memory bounded** (``RAY_task_events_max_num_task_in_gcs=10000``, read by the GCS):
  the GCS keeps an event record of every task and actor call for the dashboard, up to 100,000 by
  default, about 5 kB each. Every search is a call to each searcher, so an hour of mixed traffic
  (``bench/soak.py``) grew the GCS from 66 to 264 MB, linearly, toward ~500 MB. With 10,000 the
  dashboard still lists the latest calls and the GCS levels off (30,000 calls: 24 → 67 MB, against
  24 → 129 MB with the default). Each call evicted past that cap is then remembered as a "dropped
  attempt" (for the dashboard's data-loss note), up to a million per job by default
  (``RAY_task_events_max_dropped_task_attempts_tracked_per_job_in_gcs``, also read by the GCS):
  the GCS still grew by 13 MB an hour in an hour's soak. We keep 10,000
  (`bench/bench_gcs_memory.py`: 200,000 calls, +0.62 MB per 10,000 calls after the cap filled
  with the event cap alone, -0.16 with both).

* **Two malloc arenas in a replica** (``MALLOC_ARENA_MAX=2``, read by glibc when the replica's
  process starts): every thread that allocates gets an arena of its own, up to eight per core,
  and the API replica runs its sync routes, store reads and highlighting in a pool of threads. A
  page's worth of short-lived objects freed in one arena is not reused by the next request's
  thread, so the replica's resident memory rose and fell with the pages it built and drifted
  upwards over a soak (245 → 322 MB in 25 minutes, peak 370). Two arenas cost nothing
  measurable here (two cores: at most two threads run at once).

Where they must be set: ``PROXY_ENV`` in the environment of the processes Ray starts, so before
``ray.init`` (`install_proxy_env`, which `codesearch serve` calls for the Ray instance it starts)
or ``ray start`` (``cluster.yaml``); ``REPLICA_ENV`` travels with the deployment
(`codesearch.serving.deployment`), so replicas have it wherever they run. Values already in the
environment win: an operator can turn any of them back.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, MutableMapping
from typing import Any

from codesearch import environment, forwarded

#: The Serve application's name unless told otherwise (what `codesearch serve` deploys and removes).
APP_NAME = "codesearch"
#: The deployment that owns the runtime actors (`bootstrap.RuntimeOwner`); the API's is ``codesearch-api``.
RUNTIME_DEPLOYMENT = "codesearch-runtime"

#: For Serve's HTTP proxies and its controller (set before Ray starts them).
PROXY_ENV = {
    "RAY_SERVE_PROXY_USE_GRPC": "1",
    "RAY_SERVE_RUN_ROUTER_IN_SEPARATE_LOOP": "0",
    "RAY_SERVE_PROXY_HEALTH_CHECK_PERIOD_S": "2",
    "RAY_task_events_max_num_task_in_gcs": "10000",
    "RAY_task_events_max_dropped_task_attempts_tracked_per_job_in_gcs": "10000",
    **forwarded.PROXY_ENV,
}
#: Seconds between Serve's health checks of a replica (``health_check_period_s`` of our
#: deployments; Serve's default is 10): a replica whose process died is noticed at its next
#: check, then replaced, so this is most of how long a dead replica goes unreplaced.
HEALTH_CHECK_PERIOD_S = 2.0
#: For the API's replicas (the deployment's ``runtime_env``).
REPLICA_ENV = {
    "RAY_SERVE_RUN_USER_CODE_IN_SEPARATE_THREAD": "0",
    "MALLOC_ARENA_MAX": "2",
}


def install_proxy_env(environ: MutableMapping[str, str] | None = None) -> None:
    """Put `PROXY_ENV` into the environment of a Ray instance this process is about to start
    (its processes inherit it); a value already set is kept."""
    environ = os.environ if environ is None else environ
    for name, value in PROXY_ENV.items():
        environ.setdefault(name, value)


def replica_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """`REPLICA_ENV`, with the values `environ` (default `os.environ`) sets already."""
    environ = os.environ if environ is None else environ
    return {name: environ.get(name, value) for name, value in REPLICA_ENV.items()}


def logging_config(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Serve's ``logging_config`` for the proxies and the replicas: access logs only at
    ``SOURCEBOT_LOG_LEVEL=debug``."""
    return {"enable_access_log": environment.log_level(environ) <= logging.DEBUG}
