"""The application builder for ``serve run`` and ``serve deploy`` on a Ray cluster.

``serve_config.yaml`` names it: ``import_path: codesearch.serving.app_builder:app``. Serve calls
``app(args)`` with the config's ``args`` and deploys the application it returns: the same one
`codesearch serve` runs (`codesearch.serving.bootstrap`), with two deployments,
``codesearch-runtime`` (one replica that starts and owns the scheduler, the workers, the
compactor and the shard searchers) and ``codesearch-api`` (the HTTP API; the config's
``deployments: [{name: codesearch-api, ...}]`` overrides ``num_replicas``,
``max_ongoing_requests``, ``ray_actor_options``).

``app`` is a typed application builder: its parameter is annotated with `ServiceArgs`, a pydantic
model, so Serve validates the config's ``args`` into it before calling it. The arguments, their
defaults and how each is resolved are `codesearch.serving.spec`'s, the same as `codesearch
serve`'s: both front doors make their `ServiceSpec` with `spec.spec_from`. An unknown argument
or a bad value is refused with a message naming it (a typo would otherwise be ignored).

``app(args)`` itself starts nothing: it reads the config and the environment of the process that
builds the application (with ``serve deploy``, a build task of the Serve controller), whose own
environment it leaves as it is, and returns the bound application. The runtime actors belong to
the ``codesearch-runtime`` replica (detached: a successor of a replica that died adopts them):
``serve shutdown``, ``serve delete <app>`` or a redeploy remove them with it, after the scheduler
finished its tick and the workers their jobs. The
runtime actors need the data directory at the same path on the nodes where they run (shared
storage such as NFS, see docs/cluster.md), or ``runtime_resources`` (custom resources, e.g.
``{"codesearch_data": 0.01}``) to pin the runtime to the node that has it; searchers elsewhere
then take ``searcher_data_dir``.

Secrets: the builder hands what it forwards from its own environment (`bootstrap.forwarded_environment`:
the server secret, the webhook secrets, ``DATABASE_URL``, the config's ``environmentOverrides``,
...) to the replicas and runtime actors as a constructor argument (`codesearch.sealed_env`), never
in a ``runtime_env``. The config's own ``runtime_env`` and ``args`` are the operator's: Ray logs a
runtime env in clear text (``runtime_env_agent.log`` on every node) and ``serve config`` and the
dashboard show both, so secrets belong in the nodes' environment (before ``ray start``), where the
build task reads them, not there.

How to stop it without cutting a request: the ``shutdown`` command runs `codesearch.serving.stop`,
the stop of `codesearch serve` too: it drains the application (new requests are refused with a
JSON 503, running ones finish, at most ``--drain-timeout`` seconds, 30 by default), deletes it,
and waits for its runtime's actors to end::

    python -m codesearch.serving.app_builder shutdown --address auto [--app codesearch]

``serve shutdown`` and ``serve delete`` also remove everything, runtime actors included, but do
not drain: ``serve shutdown`` closes the proxies at once (requests being answered are cut),
``serve delete`` answers newcomers with Serve's plain-text 404 while the replicas finish.
"""

from __future__ import annotations

import json
import logging
import os
import re
from typing import TYPE_CHECKING, Any

from codesearch.plurals import plural
from codesearch.serving.bootstrap import DEFAULT_PREFIX, names, runtime_actors
from codesearch.serving.serve_settings import APP_NAME
from codesearch.serving.spec import ServiceArgs, spec_from

if TYPE_CHECKING:
    from ray.serve import Application

log = logging.getLogger(__name__)

__all__ = ["APP_NAME", "DEFAULT_PREFIX", "ServiceArgs", "app", "names", "runtime_record"]


def app(args: ServiceArgs) -> Application:
    """The Serve application of `args` (see `codesearch.serving.spec`), built in this process's
    environment. Serve hands `args` validated (the annotation below); a mapping given directly (a
    test, a notebook) is validated here the same way."""
    from codesearch.serving.bootstrap import application

    return application(spec_from(ServiceArgs.of(args), os.environ))


# Serve validates the config's `args` into the builder's parameter type when that is a pydantic
# model class (`ray.serve._private.api.call_user_app_builder_with_args_if_necessary`), but reads the
# annotation as written: under postponed annotations (`from __future__ import annotations`) that
# is the string "ServiceArgs". The class itself, for Serve.
app.__annotations__["args"] = ServiceArgs


def runtime_record(prefix: str = DEFAULT_PREFIX) -> dict[str, Any] | None:
    """What runs of the runtime `prefix` now: its live actors, and the data directory and
    searcher count its searchers published (`publish_deployment`); None when nothing runs."""
    from codesearch.runtime.searchers import published_deployment

    actors = [name for name, _ in runtime_actors(prefix, None)]
    if not actors:
        return None
    n = names(prefix)
    published = published_deployment(n["searchers"]) or {}
    return {
        "prefix": prefix,
        "actors": actors,
        "scheduler": n["scheduler"] if n["scheduler"] in actors else None,
        "workers": [a for a in actors if re.search(r"-(sync|index)-\d+$", a)],
        "searchers": published.get("searchers"),
        "data_dir": published.get("data_dir"),
    }


def main(argv: list[str] | None = None) -> int:
    """``python -m codesearch.serving.app_builder shutdown [--address auto] [--prefix P] [--app NAME]``
    (`codesearch.serving.stop.stop`: drain and delete the application, then make sure no actor of
    its runtime is left), ``... status``."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m codesearch.serving.app_builder")
    ap.add_argument("command", choices=["shutdown", "status"])
    ap.add_argument("--address", default=os.environ.get("RAY_ADDRESS") or "auto")
    ap.add_argument("--prefix", default=DEFAULT_PREFIX)
    ap.add_argument("--app", default=APP_NAME, help=f"the Serve application to drain and delete ({APP_NAME})")
    ap.add_argument(
        "--drain-timeout",
        type=float,
        metavar="SECONDS",
        help="how long the application's running requests may take to finish (default: $CODESEARCH_DRAIN_TIMEOUT_S, "
        "else 30)",
    )
    a = ap.parse_args(argv)
    if a.drain_timeout is not None and not 0 <= a.drain_timeout < float("inf"):
        ap.error(f"--drain-timeout must be a number of seconds, 0 or more, not {a.drain_timeout:g}")
    import ray

    ray.init(address=a.address, log_to_driver=False)
    try:
        if a.command == "status":
            print(json.dumps({"runtime": runtime_record(a.prefix)}, indent=2))
            return 0
        from codesearch.serving.stop import stop

        killed = stop(a.app, a.prefix, a.drain_timeout)
        print(f"stopped {plural(len(killed), 'actor')}: {', '.join(killed) or '-'}")
        return 0
    finally:
        ray.shutdown()


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
