"""The Ray Serve application: a FastAPI ingress built inside each replica.

`search_application(...)` returns a bound Serve application whose replicas attach to the named
shard searchers started by `SearcherPool.create(..., name_prefix=...)` and open the state store
of `data_dir` (lazily, one `Store` per replica). Replicas and `max_ongoing_requests` are
configurable. Serve's default of 5 ongoing requests collapses under 32 clients; we default to
`MAX_ONGOING_REQUESTS`, far more than the searchers can serve at once, because a replica's
places are cheap (an awaited request is a coroutine; searches wait in the searchers, bounded by
their deadline) and a full replica queues every request behind it, ``/api/health`` included.
What one request may hold a place for is bounded by `codesearch.service.middleware.limits` (credentials
before the body, body size and read time) and by the search deadline.

Stopping without losing requests: every replica's application sits behind a `drain.DrainGate`
(the drain of `codesearch.serving.stop`, which `codesearch serve`'s SIGTERM and the ``shutdown``
command of `app_builder` call), and when Serve itself stops a replica (a redeploy, fewer
replicas) it lets the replica's requests finish for up to ``graceful_shutdown_timeout_s``
(`DRAIN_TIMEOUT_S` unless given), checking every ``graceful_shutdown_wait_loop_s``
(`SHUTDOWN_WAIT_LOOP_S`: an idle replica stops within it).

Anonymous access is decided when `search_application` is called, in the calling process:
`anonymous_access` when given, else ``FORCE_ENABLE_ANONYMOUS_ACCESS=true`` in its environment or
`enable_public_access` (``settings.enablePublicAccess``). ``DATABASE_URL`` and
``DEFAULT_MAX_MATCH_COUNT`` (the cap on a search's ``matches``) are likewise read here unless
given, and handed to the replicas, which may run on other nodes with another environment (both
front doors give all three: `codesearch.serving.spec` resolves them once). The server
secret for API keys is ``SOURCEBOT_ENCRYPTION_KEY`` in the replicas' environment, else the
``.secret`` file of the (shared) data directory.

The environment the builder forwards (`bootstrap.forwarded_environment`: that secret, the webhook
secrets, ...) is the replica's constructor argument, a `SealedEnv` applied before the app is built,
never the deployment's ``runtime_env``, which Ray logs and shows in clear text
(`codesearch.sealed_env`); the ``runtime_env`` holds only Serve's switches (`serve_settings`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from ray import serve

from codesearch import environment
from codesearch.app.search import max_match_count
from codesearch.errors import ServiceUnavailable
from codesearch.runtime.searchers import SearcherPool
from codesearch.sealed_env import SealedEnv
from codesearch.search.options import DEFAULT_PUBLIC_URL
from codesearch.service.auth import anonymous_access_enabled
from codesearch.serving import lazy_receive, serve_settings
from codesearch.serving.api import build_app
from codesearch.serving.drain import DrainGate


def _builder(
    name_prefix: str,
    searchers: int,
    public_url: str,
    contexts: dict[str, Any] | None,
    data_dir: str | None,
    database_url: str | None,
    anonymous_access: bool,
    max_matches: int,
    app_options: dict[str, Any],
) -> Callable[[], DrainGate]:
    def build() -> DrainGate:
        lazy_receive.install()  # this replica asks the proxy for a request's messages only when the app does
        pool: dict[str, SearcherPool] = {}

        def get_searcher() -> SearcherPool:
            if "pool" not in pool:
                try:
                    pool["pool"] = SearcherPool.attach(name_prefix, searchers)
                except ValueError as e:  # not started yet (the runtime replica is still coming up)
                    raise ServiceUnavailable("the search runtime is starting; try again in a moment") from e
            return pool["pool"]

        return DrainGate(
            build_app(
                get_searcher,
                public_url=public_url,
                contexts=contexts,
                data_dir=data_dir,
                database_url=database_url,
                anonymous_access=anonymous_access,
                max_matches=max_matches,
                **app_options,
            )
        )

    return build


#: Seconds an API replica of an application with a runtime waits for its searchers before it
#: takes requests (it then answers 503 SERVICE_UNAVAILABLE until they are there).
RUNTIME_WAIT_S = 120.0


def wait_for_searchers(name_prefix: str, count: int, timeout_s: float) -> bool:
    """Wait until the runtime published its `count` searchers named `name_prefix` (the last
    thing it does, after their layout: an API replica that attached earlier could take two
    copies for twice the partitions), at most `timeout_s`; whether it did."""
    import time

    from codesearch.runtime.searchers import published_deployment

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            record = published_deployment(name_prefix)
        except Exception:  # noqa: BLE001 - the registry is being replaced (a redeploy): ask again
            record = None
        if record and int(record["searchers"]) == count:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)


#: Requests one replica takes at once (see the module docstring).
MAX_ONGOING_REQUESTS = 1000
#: Seconds a stopping replica may take to finish its requests (Serve's ``graceful_shutdown_timeout_s``).
DRAIN_TIMEOUT_S = 30.0
#: Seconds between a stopping replica's checks for requests left (``graceful_shutdown_wait_loop_s``).
SHUTDOWN_WAIT_LOOP_S = 0.5


def search_application(
    name_prefix: str,
    searchers: int,
    *,
    replicas: int = 1,
    max_ongoing_requests: int = MAX_ONGOING_REQUESTS,
    public_url: str = DEFAULT_PUBLIC_URL,
    contexts: dict[str, Any] | None = None,
    data_dir: str | None = None,
    database_url: str | None = None,
    anonymous_access: bool | None = None,
    enable_public_access: bool = False,
    search_timeout_s: float | None = None,
    limits: dict[str, Any] | None = None,
    drain_timeout_s: float = DRAIN_TIMEOUT_S,
    runtime: serve.Application | None = None,
    env: SealedEnv | None = None,
    identity_providers: list[Any] | None = None,
    max_matches: int | None = None,
) -> serve.Application:
    """A bound Serve application serving the HTTP API over the named searchers and `data_dir`'s
    store (`search_timeout_s` and `limits` as in `api.build_app`; `drain_timeout_s` as Serve's
    ``graceful_shutdown_timeout_s``). `runtime`, a bound deployment that starts the searchers
    (`bootstrap.runtime_deployment`), becomes part of the application: Serve deploys and removes
    it with the API. `env` is set in the replicas' environment before anything reads it
    (`bootstrap.forwarded_environment`; see the module docstring).
    `identity_providers`: the config's typed `identityProviders` (`codesearch.sso`); the replicas
    read their client ids and secrets from their own environment when a sign-in needs them.
    `max_matches`: the cap on a search's ``matches`` (default ``DEFAULT_MAX_MATCH_COUNT`` here)."""
    if anonymous_access is None:
        anonymous_access = anonymous_access_enabled(os.environ, enable_public_access)
    if database_url is None:
        database_url = environment.database_url(os.environ)
    if data_dir is not None:
        data_dir = os.path.abspath(data_dir)
    if max_matches is None:
        max_matches = max_match_count(os.environ)

    app_options: dict[str, Any] = {
        "search_timeout_s": search_timeout_s,
        "limits": limits,
        "identity_providers": list(identity_providers or []),
    }

    class CodesearchAPI:
        def __init__(self, env: SealedEnv, runtime: object = None) -> None:
            env.apply()  # first: the app is built after this constructor (Serve's ingress) and reads it
            self.runtime = runtime  # held so the application owns it; the API finds the searchers by name
            if runtime is not None:  # HTTP opens once searches can be answered (the runtime starts in seconds)
                wait_for_searchers(name_prefix, searchers, RUNTIME_WAIT_S)

    # the decorators applied as calls: a type checker keeps a decorated class's own type, which has no `bind`
    ingress = serve.ingress(
        _builder(
            name_prefix,
            searchers,
            public_url,
            contexts,
            data_dir,
            database_url,
            anonymous_access,
            max_matches,
            app_options,
        )
    )
    deployment = serve.deployment(
        name="codesearch-api",
        num_replicas=replicas,
        max_ongoing_requests=max_ongoing_requests,
        graceful_shutdown_timeout_s=drain_timeout_s,
        graceful_shutdown_wait_loop_s=SHUTDOWN_WAIT_LOOP_S,
        health_check_period_s=serve_settings.HEALTH_CHECK_PERIOD_S,
        logging_config=serve_settings.logging_config(),
        ray_actor_options={"num_cpus": 0, "runtime_env": {"env_vars": serve_settings.replica_env()}},
    )(ingress(CodesearchAPI))
    env = env or SealedEnv()
    return deployment.bind(env) if runtime is None else deployment.bind(env, runtime)
