"""A replica asks Serve's proxy for a request's messages only once the app wants one.

Why. For every HTTP request, a Serve replica starts a task that fetches the request's ASGI
messages from the proxy (`ASGIReceiveProxy.fetch_until_disconnect`): a Ray actor call from the
replica to the proxy, answered with the body, then another that waits for the disconnect. The
task starts whether or not the app ever calls ``receive()``. Our search routes do not: the proxy
sends their body ahead in the request's scope (`proxy_body.BodyAhead`), and the proxy itself
cancels the replica's work when the client goes away. So a search of a few milliseconds paid for
one or two actor calls it never used, on both ends: with the rare literal of
``bench/bench_http_path.py --venv-repos 600`` (2 cores), 2.2 ms of the proxy's CPU and 1.3 ms of
the replica's per request, 0.7-2 ms of its latency.

What. `install` changes Serve's `ASGIReceiveProxy` in the replica's process so that its fetching
task waits for the app's first ``receive()`` before it asks the proxy anything; from then on it
runs as Serve wrote it. An app that reads a body the usual way, or a streaming response that
listens for the disconnect (``/api/stream_search``, the results page), calls ``receive()`` and
gets every message as before.

`install` is called where the replica builds the app (`codesearch.serving.deployment`). It
changes nothing and says so (a warning) when the installed Ray has no such class or method:
requests then cost what Serve makes them cost.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
from typing import Any

log = logging.getLogger(__name__)

#: Set on the class once it is changed (so that a second `install` does nothing).
MARK = "_codesearch_fetch_when_asked"
#: Where an `ASGIReceiveProxy` keeps the event of the app's first ``receive()``.
_ASKED = "_codesearch_asked"


def install() -> bool:
    """Make Serve's replicas fetch a request's messages only once the app asks for one; whether
    it is so now (see the module docstring)."""
    try:
        from ray.serve._private.http_util import ASGIReceiveProxy
    except ImportError:
        log.warning("Serve has no ASGIReceiveProxy: replicas fetch every request's messages eagerly")
        return False
    return patch(ASGIReceiveProxy)


def patch(cls: Any) -> bool:
    """Change `cls` (Serve's `ASGIReceiveProxy`, or a class with the same two coroutine methods
    ``fetch_until_disconnect`` and ``__call__``) so that fetching waits for the first call."""
    if getattr(cls, MARK, False):
        return True
    fetch = getattr(cls, "fetch_until_disconnect", None)
    call = cls.__dict__.get("__call__")  # its own, not one inherited
    if not (inspect.iscoroutinefunction(fetch) and inspect.iscoroutinefunction(call)):
        log.warning("Serve's ASGIReceiveProxy changed: replicas fetch every request's messages eagerly")
        return False

    @functools.wraps(fetch)
    async def fetch_when_asked(self: Any) -> Any:
        await _asked(self).wait()
        return await fetch(self)

    @functools.wraps(call)
    async def ask(self: Any) -> Any:
        _asked(self).set()
        return await call(self)

    cls.fetch_until_disconnect = fetch_when_asked
    cls.__call__ = ask
    setattr(cls, MARK, True)
    return True


def _asked(receive: Any) -> asyncio.Event:
    """The event the app's first ``receive()`` sets (made on first use, in the request's loop)."""
    event = receive.__dict__.get(_ASKED)
    if event is None:
        event = receive.__dict__[_ASKED] = asyncio.Event()
    assert isinstance(event, asyncio.Event)
    return event
