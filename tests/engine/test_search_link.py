"""The local search link's socket protocol, without Ray: a `LinkServer` answering with a given
function, and `LinkClient`s on an event loop (`codesearch.runtime.search_link`)."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import stat
import tempfile
import threading
import time

import pytest

from codesearch.errors import QueryError
from codesearch.runtime.search_link import (
    ANSWER,
    ASK,
    HEADER,
    MAX_FRAME,
    LinkBroken,
    LinkClient,
    LinkServer,
    SearchFailed,
)


@pytest.fixture
def short_dir():
    """A directory with a short path (AF_UNIX paths are at most 108 bytes; pytest's are long)."""
    d = tempfile.mkdtemp(prefix="lk")
    yield d
    shutil.rmtree(d, ignore_errors=True)


class Answers:
    """The server's answer function: by request, what to do. Records what it saw."""

    def __init__(self) -> None:
        self.cancelled: dict[bytes, bool] = {}
        self.started = threading.Event()

    def __call__(self, request: bytes, cancelled) -> bytes:
        if request.startswith(b"sleep:"):  # the answer after the time asked, or once cancelled
            self.started.set()
            until = time.monotonic() + float(request[6:])
            while time.monotonic() < until and not cancelled():
                time.sleep(0.005)
            self.cancelled[request] = cancelled()
            return b"slept"
        if request == b"query error":
            raise QueryError("unbalanced parenthesis")
        if request == b"bug":
            raise ValueError("a bug")
        if request == b"big":
            return b"x" * 5_000_000
        return request[::-1]


async def _client(path: str) -> LinkClient:
    reader, writer = await asyncio.open_unix_connection(path)
    return LinkClient(reader, writer, lambda: None)


def test_the_socket_is_in_a_directory_only_its_user_can_enter(short_dir):
    server = LinkServer(Answers(), 2, short_dir)
    try:
        assert stat.S_IMODE(os.stat(server.directory).st_mode) == 0o700
        assert os.path.dirname(server.path) == server.directory
    finally:
        server.close()
    assert not os.path.exists(server.directory)


def test_a_path_too_long_for_a_unix_socket_is_refused_and_leaves_nothing(tmp_path):
    deep = tmp_path / ("d" * 100)
    deep.mkdir()
    with pytest.raises(OSError, match="too long"):
        LinkServer(Answers(), 1, str(deep))
    assert list(deep.iterdir()) == []


def test_answers_come_back_to_their_requests_in_any_order(short_dir):
    server = LinkServer(Answers(), 4, short_dir)

    async def main():
        client = await _client(server.path)
        slow = client.ask(b"sleep:0.3")[1]
        quick = [client.ask(f"req{i}".encode())[1] for i in range(20)]
        got = await asyncio.gather(*quick)
        assert got == [f"req{i}".encode()[::-1] for i in range(20)] and not slow.done()  # not held behind it
        assert await slow == b"slept"
        assert await client.ask(b"big")[1] == b"x" * 5_000_000
        client.close()

    try:
        asyncio.run(main())
    finally:
        server.close()


def test_errors_are_ours_raised_as_such_or_a_failed_search(short_dir):
    server = LinkServer(Answers(), 2, short_dir)

    async def main():
        client = await _client(server.path)
        with pytest.raises(QueryError, match="unbalanced parenthesis"):
            await client.ask(b"query error")[1]
        with pytest.raises(SearchFailed, match="ValueError: a bug"):
            await client.ask(b"bug")[1]
        assert await client.ask(b"still alive")[1] == b"evila llits"
        client.close()

    try:
        asyncio.run(main())
    finally:
        server.close()


def test_a_cancel_reaches_the_running_search(short_dir):
    answers = Answers()
    server = LinkServer(answers, 2, short_dir)

    async def main():
        client = await _client(server.path)
        ident, fut = client.ask(b"sleep:10")
        await asyncio.to_thread(answers.started.wait, 5)
        started = time.monotonic()
        client.cancel(ident)
        assert fut.cancelled()
        while b"sleep:10" not in answers.cancelled and time.monotonic() - started < 5:
            await asyncio.sleep(0.01)
        assert answers.cancelled.get(b"sleep:10") is True and time.monotonic() - started < 5
        assert await client.ask(b"next")[1] == b"txen"  # the late answer of the cancelled one is dropped
        client.close()

    try:
        asyncio.run(main())
    finally:
        server.close()


def test_a_closed_connection_cancels_its_searches(short_dir):
    answers = Answers()
    server = LinkServer(answers, 2, short_dir)

    async def main():
        client = await _client(server.path)
        client.ask(b"sleep:10")
        await asyncio.to_thread(answers.started.wait, 5)
        client.close()
        started = time.monotonic()
        while not answers.cancelled and time.monotonic() - started < 5:
            await asyncio.sleep(0.01)
        assert answers.cancelled == {b"sleep:10": True}

    try:
        asyncio.run(main())
    finally:
        server.close()


def test_a_searcher_that_goes_away_breaks_the_link_of_its_pending_searches(short_dir):
    answers = Answers()
    server = LinkServer(answers, 2, short_dir)
    closed = []

    async def main():
        reader, writer = await asyncio.open_unix_connection(server.path)
        client = LinkClient(reader, writer, lambda: closed.append(True))
        pending = client.ask(b"sleep:10")[1]
        await asyncio.to_thread(answers.started.wait, 5)
        server.listener.close()
        for conn in _server_sockets(server):
            conn.shutdown(socket.SHUT_RDWR)
        with pytest.raises(LinkBroken):
            await asyncio.wait_for(pending, 5)
        assert not client.alive and closed == [True]
        with pytest.raises(LinkBroken):  # asked after: fails at once, never hangs
            await asyncio.wait_for(client.ask(b"more")[1], 5)

    try:
        asyncio.run(main())
    finally:
        server.close()


def _server_sockets(server: LinkServer) -> list[socket.socket]:
    import gc

    from codesearch.runtime.search_link import _Connection

    return [c.conn for c in gc.get_objects() if isinstance(c, _Connection) and c.server is server]


def test_a_frame_larger_than_allowed_closes_the_connection(short_dir):
    server = LinkServer(Answers(), 2, short_dir)
    try:
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(server.path)
            s.sendall(HEADER.pack(MAX_FRAME + 1, ASK, 1))
            s.settimeout(5)
            assert s.recv(1) == b""  # closed, nothing answered
        with socket.socket(socket.AF_UNIX) as s:  # the server still serves others
            s.connect(server.path)
            s.sendall(HEADER.pack(2, ASK, 7) + b"ab")
            s.settimeout(5)
            length, kind, ident = HEADER.unpack(s.recv(HEADER.size, socket.MSG_WAITALL))
            assert (kind, ident, s.recv(length, socket.MSG_WAITALL)) == (ANSWER, 7, b"ba")
    finally:
        server.close()


def test_a_cancel_that_comes_after_the_answer_leaves_nothing_behind(short_dir):
    """The caller may cancel a search whose answer is already on its way: the searcher has
    nothing to stop, and keeps no flag for it (a connection lives as long as its replica)."""
    import gc

    from codesearch.runtime.search_link import CANCEL, _Connection

    server = LinkServer(Answers(), 2, short_dir)
    try:
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(server.path)
            s.settimeout(5)
            for ident in range(1, 4):
                s.sendall(HEADER.pack(2, ASK, ident) + b"ab")
                length, kind, got = HEADER.unpack(s.recv(HEADER.size, socket.MSG_WAITALL))
                assert (kind, got, s.recv(length, socket.MSG_WAITALL)) == (ANSWER, ident, b"ba")
                s.sendall(HEADER.pack(0, CANCEL, ident))
            s.sendall(HEADER.pack(2, ASK, 9) + b"cd")  # read in order: the cancels are seen by now
            assert s.recv(HEADER.size + 2, socket.MSG_WAITALL)[-2:] == b"dc"
            connections = [c for c in gc.get_objects() if isinstance(c, _Connection) and c.server is server]
            assert len(connections) == 1
            until = time.monotonic() + 5
            while connections[0].cancelled and time.monotonic() < until:  # (ask 9's flag goes as its thread ends)
                time.sleep(0.01)
            assert connections[0].cancelled == {}
    finally:
        server.close()
