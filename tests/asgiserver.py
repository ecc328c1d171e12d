"""An ASGI app served over real HTTP on 127.0.0.1 (uvicorn in a thread), for tests that need
a real socket without Ray or Serve."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from typing import Iterator

import uvicorn


def bound_socket() -> socket.socket:
    """A socket bound to a free port of 127.0.0.1 (for an app that must know its URL before it is built)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


@contextlib.contextmanager
def serving(app, lifespan: str = "off", sock: socket.socket | None = None) -> Iterator[str]:
    """Serve `app` on a free port of 127.0.0.1 (or on `sock`, from `bound_socket`); yields its base
    URL (``http://127.0.0.1:PORT``) and stops the server when the block ends."""
    sock = sock or bound_socket()
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan=lifespan))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 20
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline, "test server did not start"
            time.sleep(0.02)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
