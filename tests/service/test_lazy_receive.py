"""A Serve replica asks the proxy for a request's messages only once the app calls ``receive()``
(codesearch/serving/lazy_receive.py).

On Serve's own `ASGIReceiveProxy` (changed in this process by `install`, as the replica's builder
does), with the proxy's side played by a coroutine that answers as `receive_asgi_messages` does
(pickled lists of messages; the second call waits for the disconnect) and counts the calls:
no call while the app has not asked, every message in order once it does, the disconnect after
the body. A route that never reads its body (a search whose body came ahead) costs no call.
"""

from __future__ import annotations

import asyncio
import pickle

import pytest

from codesearch.serving import lazy_receive

serve_http_util = pytest.importorskip("ray.serve._private.http_util")


class Proxy:
    """The proxy's side of one request: its body, then (when `leave` is set) a disconnect."""

    def __init__(self, body: bytes):
        self.calls = 0
        self.body = body
        self.leave = asyncio.Event()

    async def receive_asgi_messages(self, _metadata) -> bytes:
        self.calls += 1
        if self.calls == 1:
            return pickle.dumps([{"type": "http.request", "body": self.body, "more_body": False}])
        await self.leave.wait()
        return pickle.dumps([{"type": "http.disconnect"}])


def _receive(proxy: Proxy):
    return serve_http_util.ASGIReceiveProxy({"type": "http"}, None, proxy.receive_asgi_messages)


def test_install_changes_serves_class_once():
    assert lazy_receive.install() and lazy_receive.install()
    assert getattr(serve_http_util.ASGIReceiveProxy, lazy_receive.MARK)


def test_no_message_is_fetched_until_the_app_asks():
    lazy_receive.install()

    async def run():
        proxy = Proxy(b'{"query": "foo"}')
        receive = _receive(proxy)
        fetching = asyncio.create_task(receive.fetch_until_disconnect())  # as the replica starts it
        for _ in range(20):
            await asyncio.sleep(0)
        assert proxy.calls == 0
        fetching.cancel()  # the request ended without reading its body

    asyncio.run(run())


def test_once_asked_every_message_comes_in_order():
    lazy_receive.install()

    async def run():
        proxy = Proxy(b'{"query": "foo"}')
        receive = _receive(proxy)
        fetching = asyncio.create_task(receive.fetch_until_disconnect())
        first = await asyncio.wait_for(receive(), 5)
        assert first == {"type": "http.request", "body": b'{"query": "foo"}', "more_body": False}
        waiting = asyncio.create_task(receive())  # a streaming response listens for the disconnect
        await asyncio.sleep(0.05)
        assert not waiting.done() and proxy.calls == 2
        proxy.leave.set()
        assert await asyncio.wait_for(waiting, 5) == {"type": "http.disconnect"}
        assert await asyncio.wait_for(receive(), 5) == {"type": "http.disconnect"}  # and again, as Serve's does
        await asyncio.wait_for(fetching, 5)

    asyncio.run(run())


def test_a_class_that_is_not_serves_is_left_alone():
    class Other:
        def fetch_until_disconnect(self):  # not a coroutine: not the class this module knows
            return None

    assert not lazy_receive.patch(Other)
    assert not hasattr(Other, lazy_receive.MARK)
