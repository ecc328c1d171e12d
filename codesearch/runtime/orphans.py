"""The orphan rule: a service's detached runtime ends itself once its Serve application is gone.

A service's runtime actors are detached (they outlive a runtime replica that dies, and its
successor adopts them: `codesearch.serving.adoption`). The replica's stop ends them; what ends
them when the application is removed while no runtime replica is there to stop them is this
rule, run by the registry (`registry.RegistryActor`): once no replica of the application's
runtime deployment has existed for `orphan_s` seconds, the actors the runtime recorded
(`registry.put_runtime`) are ended, and the runtime's records removed.

What the rule never touches: actors it was not told about. It ends only the names of the
runtime record its watch was armed for (`Watch.owner`, the runtime's owner tag), and only while
that record still carries that owner tag: a notebook's or a test's searchers, another
application's runtime, or a newer runtime under the same prefix are not in it.
"""

from __future__ import annotations

import logging
import time
from typing import TypedDict

from codesearch import environment

log = logging.getLogger(__name__)

#: Seconds without any replica of the application's runtime deployment after which the runtime
#: is ended (the application was removed while its runtime replica was down; a replica that Serve
#: is replacing is listed again within seconds).
ORPHAN_S = 30.0
#: The variable that sets `ORPHAN_S` for a service (read by its runtime replica; tests lower it).
ORPHAN_ENV = "CODESEARCH_RUNTIME_ORPHAN_S"
#: Seconds between two looks for the runtime's replica.
WATCH_EVERY_S = 2.0
#: The Ray namespace of Serve's actors (its replicas among them).
SERVE_NAMESPACE = "serve"


class Watch(TypedDict):
    """What a registry watches for one runtime: the runtime `prefix`, its `owner` tag
    (``runtime:<prefix>:<application>:<token>``), the name prefix of the Serve replicas that may
    own it (`replicas`), and the bound (`orphan_s`)."""

    prefix: str
    owner: str
    replicas: str
    orphan_s: float


def orphan_s(environ: dict[str, str] | None = None) -> float:
    """`ORPHAN_S`, or the positive number of seconds `ORPHAN_ENV` says (anything else is an
    `InvalidEnvironmentVariable`)."""
    return environment.seconds(environ, ORPHAN_ENV, ORPHAN_S, zero_allowed=False)


def watch_owner(replicas: str, orphan_s: float = ORPHAN_S, every_s: float = WATCH_EVERY_S) -> bool:
    """Return True once no named actor of Serve's namespace whose name starts with `replicas`
    (``SERVE_REPLICA::<app>#codesearch-runtime#``: the runtime replica of one application, whichever
    its id) has been seen for `orphan_s`."""
    import ray

    every_s = min(every_s, max(orphan_s / 4, 0.2))
    missing_since: float | None = None
    while True:
        time.sleep(every_s)
        try:
            named = ray.util.list_named_actors(all_namespaces=True)
        except Exception as e:  # noqa: BLE001 - the GCS is busy or restarting: look again
            log.debug("registry watch: %s", e)
            continue
        if any(a["namespace"] == SERVE_NAMESPACE and a["name"].startswith(replicas) for a in named):
            missing_since = None
        elif missing_since is None:
            missing_since = time.monotonic()
        elif time.monotonic() - missing_since >= orphan_s:
            return True


def end_actors(names: list[str]) -> None:
    """Kill the named actors `names` of the namespace ``codesearch`` (those already gone are skipped)."""
    import ray

    from codesearch.runtime import NAMESPACE

    for name in names:
        try:
            ray.kill(ray.get_actor(name, namespace=NAMESPACE), no_restart=True)
        except Exception as e:  # noqa: BLE001 - already gone
            log.debug("%s not killed: %s", name, e)
