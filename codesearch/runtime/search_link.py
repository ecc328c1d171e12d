"""The local link: searches sent to a searcher on the same node over a Unix socket, not a Ray task.

Why. A search is one call to each searcher of a copy, and a Ray actor call is not cheap on two
cores: two calls and their answers cost 1.5 ms of latency and 2.3 ms of CPU (1.2 in the caller,
0.55 in each searcher) where the same bytes over a Unix socket cost 0.11-0.16 ms and 0.2 ms (a
micro-benchmark: an echo of 600 bytes). Between a replica's event loop and its answers over 10
GB, a no-match search took 5.3 ms instead of 6.5 and a rare literal 9.1 instead of 12.0, and the
caller's CPU per search fell from 2.0 to 0.7 ms (``bench/bench_fanout.py --without-link``). Ray
still places, supervises and restarts the searchers, tells the caller where a searcher's socket
is (`ShardSearcher.link_address`), and carries every search it cannot: a searcher on another
node, a caller without an event loop (the Python client, notebooks), a searcher of an older
release, a link not connected yet or broken.
Ray's compiled graphs were not taken: one graph runs one execution at a time, so a slow capped
regex would hold every other search of the replica behind it.

Who may connect. The socket is a file in a directory only this user can enter (mode 0700), and
the searcher also checks the peer's user id (``SO_PEERCRED``): the same boundary as Ray's own
local sockets, which the same processes use. The payloads are pickles, as Ray's are.

The protocol, both ways: frames of ``<length: u32><kind: u8><id: u64><payload>`` (little endian).
The caller sends `ASK` (payload: the request `ShardSearcher.search_wire` takes) and `CANCEL` (no
payload: stop search `id`, its answer is no longer wanted); the searcher answers each `ASK` once,
in any order, with `ANSWER` (payload: what `search_wire` returns) or `FAILED` (payload: the
pickled `CodesearchError` the search raised, or a message for anything else). A connection that
closes cancels its searches. One connection per caller's event loop and searcher carries every
search of that loop, concurrently.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import pickle
import shutil
import socket
import struct
import tempfile
import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, NamedTuple

from codesearch.errors import CodesearchError

if TYPE_CHECKING:
    from ray.actor import ActorHandle

log = logging.getLogger(__name__)

HEADER = struct.Struct("<IBQ")
ASK, CANCEL, ANSWER, FAILED = 1, 2, 3, 4
#: The largest frame either side accepts (an answer of a million matches is far below it).
MAX_FRAME = 1 << 30
#: AF_UNIX paths are at most 108 bytes on Linux, with the terminating NUL.
MAX_PATH = 100
#: Seconds a caller waits for a searcher to say where its socket is, and before asking again
#: one that could not be reached (it may be restarting).
RESOLVE_TIMEOUT_S = 5.0
RETRY_AFTER_S = 2.0
#: Set to ``off`` in a searcher's environment, no link is offered: every search is a Ray task
#: (for an A/B measurement, or to rule the link out).
ENV_SWITCH = "CODESEARCH_SEARCH_LINK"


class LinkBroken(Exception):
    """The link to a searcher closed before its answer came: the searcher's process died (Ray may
    have restarted it) or closed it. The caller asks that searcher again through Ray."""


class SearchFailed(Exception):
    """A search sent over the link failed in the searcher with an error that is not a
    `CodesearchError` (a bug, a failed read): the caller counts a failed searcher, as it does
    for a Ray task that raised."""


class LinkAddress(NamedTuple):
    """Where a searcher listens: its node's Ray id and its socket's path."""

    node: str
    path: str


def _frame(kind: int, ident: int, payload: bytes = b"") -> bytes:
    return HEADER.pack(len(payload), kind, ident) + payload


def _failure(e: BaseException) -> bytes:
    """The `FAILED` payload of `e`: the error itself when it is ours and pickles (the caller
    raises it as a query error), else its message (the caller counts a failed searcher)."""
    if isinstance(e, CodesearchError):
        with contextlib.suppress(Exception):
            return pickle.dumps(e, pickle.HIGHEST_PROTOCOL)
    return pickle.dumps(f"{type(e).__name__}: {e}", pickle.HIGHEST_PROTOCOL)


# ----------------------------------------------------------------------------- the searcher's side


class LinkServer:
    """Listens on a Unix socket in a private directory and answers `ASK` frames with
    ``answer(request, cancelled)`` run on a pool of `workers` threads."""

    def __init__(self, answer: Callable[[bytes, Callable[[], bool]], bytes], workers: int, directory: str):
        if not hasattr(socket, "SO_PEERCRED"):  # (Linux has it): no way to know who connects
            raise OSError("this platform cannot tell a Unix socket's peer (SO_PEERCRED)")
        self.answer = answer
        self.directory = tempfile.mkdtemp(prefix="link-", dir=directory)  # mode 0700
        self.path = os.path.join(self.directory, "s")
        if len(self.path) > MAX_PATH:
            shutil.rmtree(self.directory, ignore_errors=True)
            raise OSError(f"socket path too long for AF_UNIX: {self.path}")
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(self.path)
        self.listener.listen(64)
        self.pool = ThreadPoolExecutor(workers, thread_name_prefix="link-search")
        self.closed = False
        threading.Thread(target=self._accept, name="link-accept", daemon=True).start()

    def close(self) -> None:
        self.closed = True
        with contextlib.suppress(OSError):
            self.listener.close()
        shutil.rmtree(self.directory, ignore_errors=True)
        self.pool.shutdown(wait=False, cancel_futures=True)

    def _accept(self) -> None:
        while not self.closed:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            try:  # whatever one connection does, the next ones are still accepted
                creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
                _pid, uid, _gid = struct.unpack("3i", creds)
                if uid != os.getuid():
                    log.warning("search link: refused a connection from user id %d", uid)
                    conn.close()
                    continue
                threading.Thread(target=_Connection(self, conn).serve, name="link-conn", daemon=True).start()
            except Exception as e:  # noqa: BLE001
                log.warning("search link: a connection failed: %s", e)
                with contextlib.suppress(OSError):
                    conn.close()


class _Connection:
    """One caller's connection: reads its frames, runs its searches, writes their answers."""

    def __init__(self, server: LinkServer, conn: socket.socket):
        self.server, self.conn = server, conn
        self.write_lock = threading.Lock()
        self.cancelled: dict[int, threading.Event] = {}

    def serve(self) -> None:
        stream = self.conn.makefile("rb")
        try:
            while True:
                header = stream.read(HEADER.size)
                if len(header) < HEADER.size:
                    return
                length, kind, ident = HEADER.unpack(header)
                if length > MAX_FRAME:
                    log.warning("search link: a frame of %d bytes refused; connection closed", length)
                    return
                payload = stream.read(length)
                if len(payload) < length:
                    return
                if kind == ASK:
                    flag = self.cancelled.setdefault(ident, threading.Event())
                    self.server.pool.submit(self._search, ident, payload, flag)
                elif kind == CANCEL:  # (a search that ended already has no flag left: nothing to do)
                    running = self.cancelled.get(ident)
                    if running is not None:
                        running.set()
        except (OSError, RuntimeError):  # the caller went away; the pool shut down
            return
        finally:
            for flag in list(self.cancelled.values()):  # nobody is left to read the answers
                flag.set()
            with contextlib.suppress(OSError):
                self.conn.close()

    def _search(self, ident: int, request: bytes, flag: threading.Event) -> None:
        try:
            if flag.is_set():  # cancelled before it started
                return
            try:
                out = _frame(ANSWER, ident, self.server.answer(request, flag.is_set))
            except Exception as e:  # noqa: BLE001 - told to the caller, who decides
                out = _frame(FAILED, ident, _failure(e))
            with self.write_lock, contextlib.suppress(OSError):
                self.conn.sendall(out)
        finally:
            self.cancelled.pop(ident, None)


def serve_link(answer: Callable[[bytes, Callable[[], bool]], bytes], workers: int) -> LinkServer | None:
    """A `LinkServer` in this Ray worker's session directory, or None when the link is switched
    off (`ENV_SWITCH`) or cannot listen (a path too long, no session directory)."""
    if os.environ.get(ENV_SWITCH, "").lower() in ("off", "0", "false", "no"):
        return None
    try:
        import ray

        context = ray.get_runtime_context()  # Ray's own sockets are in the session's "sockets" too
        sockets = os.path.join(context.get_temp_dir(), context.get_session_name(), "sockets")
        os.makedirs(sockets, mode=0o700, exist_ok=True)
        return LinkServer(answer, workers, sockets)
    except Exception as e:  # noqa: BLE001 - searches still go through Ray
        log.warning("search link not offered: %s", e)
        return None


# ----------------------------------------------------------------------------- the caller's side


class LinkClient:
    """A caller's connection to one searcher, on one event loop: `ask` sends a request and returns
    the future of its answer (bytes); `cancel` tells the searcher to stop."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, on_close: Callable[[], None]):
        self.reader, self.writer = reader, writer
        self.futures: dict[int, asyncio.Future[bytes]] = {}
        self.ids = iter(range(1, 1 << 63))
        self.alive = True
        self.on_close = on_close
        #: the reader of the answers (kept here: the loop holds only a weak reference to a task)
        self.task = asyncio.get_running_loop().create_task(self._read())

    def ask(self, request: bytes) -> tuple[int, asyncio.Future[bytes]]:
        ident = next(self.ids)
        fut: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        if not self.alive:
            fut.set_exception(LinkBroken("search link closed"))
            return ident, fut
        self.futures[ident] = fut
        self.writer.write(_frame(ASK, ident, request))
        return ident, fut

    def cancel(self, ident: int) -> None:
        fut = self.futures.pop(ident, None)
        if fut is not None:
            fut.cancel()
            if self.alive:
                with contextlib.suppress(Exception):
                    self.writer.write(_frame(CANCEL, ident))

    async def _read(self) -> None:
        why = "closed by the searcher"
        try:
            while True:
                length, kind, ident = HEADER.unpack(await self.reader.readexactly(HEADER.size))
                if length > MAX_FRAME:
                    why = f"a frame of {length} bytes"
                    return
                payload = await self.reader.readexactly(length)
                fut = self.futures.pop(ident, None)
                if fut is None or fut.done():  # cancelled meanwhile
                    continue
                if kind == ANSWER:
                    fut.set_result(payload)
                else:
                    fut.set_exception(_raised(payload))
        except (asyncio.IncompleteReadError, OSError) as e:
            why = f"{type(e).__name__}"
        finally:
            self.close(why)

    def close(self, why: str = "closed") -> None:
        if not self.alive:
            return
        self.alive = False
        for fut in self.futures.values():
            if not fut.done():
                fut.set_exception(LinkBroken(f"search link {why}"))
        self.futures.clear()
        with contextlib.suppress(Exception):
            self.writer.close()
        self.on_close()


def _raised(payload: bytes) -> BaseException:
    """The exception a `FAILED` payload stands for: our error as raised, else `SearchFailed`."""
    try:
        failure = pickle.loads(payload)
    except Exception as e:  # noqa: BLE001
        return SearchFailed(f"an unreadable failure ({type(e).__name__})")
    return failure if isinstance(failure, CodesearchError) else SearchFailed(str(failure))


class _Slot:
    """A searcher's link as one loop knows it: connected (`client`), being resolved, or not
    to be tried again before `retry_at`."""

    __slots__ = ("client", "resolving", "retry_at")

    def __init__(self) -> None:
        self.client: LinkClient | None = None
        self.resolving = False
        self.retry_at = 0.0


class Links:
    """The links of one pool's caller to its searchers, per event loop. `client(actor)` is the
    connected link of `actor` or None; None starts connecting it in the background, so the
    search that asked goes through Ray and the next ones through the link."""

    def __init__(self) -> None:
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, _Slot]] = (
            weakref.WeakKeyDictionary()
        )
        self._node: str | None = None

    def client(self, actor: ActorHandle[Any]) -> LinkClient | None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # not on an event loop: Ray it is
            return None
        slots = self._loops.setdefault(loop, {})
        key = actor._actor_id.hex()
        slot = slots.get(key)
        if slot is None:
            slot = slots[key] = _Slot()
        if slot.client is not None and slot.client.alive:
            return slot.client
        if not slot.resolving and time.monotonic() >= slot.retry_at:
            slot.resolving = True
            loop.create_task(self._connect(slot, actor))
        return None

    async def _connect(self, slot: _Slot, actor: ActorHandle[Any]) -> None:
        slot.client = None
        try:
            method = getattr(actor, "link_address", None)
            if method is None:  # a searcher of an older release: never
                slot.retry_at = float("inf")
                return
            answer = await asyncio.wait_for(method.remote(), RESOLVE_TIMEOUT_S)  # (an ObjectRef is awaitable)
            address = LinkAddress(*answer) if answer is not None else None
            if address is None or address.node != self._our_node():
                slot.retry_at = float("inf")  # switched off, or on another node: Ray carries it
                return
            reader, writer = await asyncio.open_unix_connection(address.path)

            def closed() -> None:
                slot.retry_at = time.monotonic() + RETRY_AFTER_S

            slot.client = LinkClient(reader, writer, closed)
        except Exception as e:  # noqa: BLE001 - restarting, unreachable: Ray carries the searches meanwhile
            log.info("search link to a searcher not connected: %s", e)
            slot.retry_at = time.monotonic() + RETRY_AFTER_S
        finally:
            slot.resolving = False

    def _our_node(self) -> str:
        if self._node is None:
            import ray

            self._node = ray.get_runtime_context().get_node_id()
        return self._node
