"""First results first: on one replica, a results page still waiting for its first result goes
before the rest of the pages that already show theirs.

A results page is written in two parts (`codesearch.web.results_page`): its first file, drawn
and sent at once, then the rest, drawn in slices of a few milliseconds in worker threads. The rest
of one page and the start of another share the replica's process (and its GIL). The commonest
case is one user searching again: the browser sends the new search while the old page is still
being written, and until the new page's headers arrive it keeps reading the old one. The old
page's slices then held the new page back by as much as its remaining drawing, which is the time
the user is waiting for.

So a page that has shown its first result asks for a turn (`FirstResultsFirst.turn`) before each
slice, and waits while any page of this replica is still before its first result (`enter` ...
`Waiting.done`). The wait is bounded twice, so nothing starves under a steady stream of new
searches: at most `TURN_S` per slice and `PAGE_BUDGET_S` per page. A waiting page that never
reports done (its stream never started: the browser left before the body) stops counting after
`STALE_S`.

One gate per event loop (`gate`): a replica's requests share its loop; tests that run several
loops get one each.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import weakref
from collections.abc import Callable

#: The longest one slice waits for its turn (seconds).
TURN_S = 0.05
#: The longest one page waits over all its slices (seconds).
PAGE_BUDGET_S = 0.15
#: A page still "waiting" after this long is not counted any more (seconds).
STALE_S = 5.0


class Waiting:
    """One page before its first result; `done` (idempotent) once it is shown or the page ends."""

    __slots__ = ("_gate",)

    def __init__(self, gate: FirstResultsFirst) -> None:
        self._gate: FirstResultsFirst | None = gate

    def done(self) -> None:
        gate, self._gate = self._gate, None
        if gate is not None:
            gate._leave(self)


class PageTurns:
    """One page's turns: what it has waited so far, against `PAGE_BUDGET_S`."""

    __slots__ = ("_gate", "waited")

    def __init__(self, gate: FirstResultsFirst) -> None:
        self._gate = gate
        self.waited = 0.0

    async def turn(self) -> None:
        """Wait (bounded) while another page of this replica waits for its first result."""
        left = PAGE_BUDGET_S - self.waited
        if left > 0:
            self.waited += await self._gate.turn(min(TURN_S, left))


class FirstResultsFirst:
    """The pages of one event loop waiting for their first result, and the turns of the others."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._waiting: dict[Waiting, float] = {}
        self._free = asyncio.Event()
        self._free.set()

    def enter(self) -> Waiting:
        """A page starts: it waits for its first result until `Waiting.done`."""
        w = Waiting(self)
        self._waiting[w] = self._clock()
        self._free.clear()
        return w

    def pages(self) -> PageTurns:
        """The turns of one page after its first result."""
        return PageTurns(self)

    def waiting(self) -> int:
        """Pages before their first result now (the stale ones dropped)."""
        now = self._clock()
        for w, since in list(self._waiting.items()):
            if now - since > STALE_S:
                w.done()
        return len(self._waiting)

    async def turn(self, limit: float) -> float:
        """Wait while a page waits for its first result, `limit` seconds at most; the seconds waited."""
        if not self.waiting():
            return 0.0
        start = self._clock()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._free.wait(), limit)
        return self._clock() - start

    def _leave(self, w: Waiting) -> None:
        self._waiting.pop(w, None)
        if not self._waiting:
            self._free.set()


_gates: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, FirstResultsFirst] = weakref.WeakKeyDictionary()


def gate() -> FirstResultsFirst:
    """The running event loop's gate."""
    loop = asyncio.get_running_loop()
    g = _gates.get(loop)
    if g is None:
        g = _gates[loop] = FirstResultsFirst()
    return g
