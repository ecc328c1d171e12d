"""How many git processes the callers of one server process may run at once.

A git read a caller asks for (a blame, a diff, a commit list, a file at a ref) can cost up to
its time limit (`process.GIT_TIMEOUT_S`) of CPU. Forty such reads at once on a two-core node
used to starve everything else the process does, ``/api/health`` included. So, in a process that
serves callers (an API replica: `install`), every git process started on a caller's behalf
takes a **slot** first:

* at most `GitSlots.per_caller` slots per caller (a user, or every anonymous visitor together),
  so one caller cannot take the node from the others;
* at most `GitSlots.total` slots in the process, so all callers together leave CPU for the rest;
* a git process that finds no slot waits up to `GitSlots.wait_s`, then the request fails with
  `GitBusy` (HTTP 429, ``Retry-After``) naming which limit was reached.

Who the caller is comes from a `Claim` the request's work holds in a context variable
(`claim`, called where a request first reaches a repository: `ToolContext.git_dir`). The
claim is what holds a slot, not the single process: the git processes of one request, nested
(a ``cat-file`` stream open while a ``rev-parse`` runs) or one after the other, share the
request's slot, so a request never waits for itself. Git work with no claim (the indexers, the
mirrors, a notebook's own process) is not limited here: it is bounded by its job's own limits.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import os
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from codesearch.errors import GitBusy

__all__ = ["Claim", "GitSlots", "claim", "hold", "install", "installed", "settings_from_environ"]

#: Defaults: slots per caller, slots per process (per CPU, at least `MIN_TOTAL`), seconds to wait.
PER_CALLER = 2
TOTAL_PER_CPU = 2
MIN_TOTAL = 4
WAIT_S = 10.0


@dataclass
class GitSlots:
    """The slots of one process (see the module docstring)."""

    per_caller: int = PER_CALLER
    total: int = MIN_TOTAL
    wait_s: float = WAIT_S
    _cond: threading.Condition = field(default_factory=threading.Condition, repr=False)
    _by_caller: dict[str, int] = field(default_factory=dict, repr=False)
    _in_use: int = field(default=0, repr=False)

    def __post_init__(self) -> None:
        if self.per_caller < 1 or self.total < 1 or self.wait_s < 0:
            raise ValueError(f"git slots need per_caller >= 1, total >= 1, wait_s >= 0 (got {self})")

    def acquire(self, caller: str) -> None:
        """Take a slot for `caller`, waiting up to `wait_s`; `GitBusy` when none comes free."""
        deadline = time.monotonic() + self.wait_s
        with self._cond:
            while True:
                mine = self._by_caller.get(caller, 0)
                if mine < self.per_caller and self._in_use < self.total:
                    self._by_caller[caller] = mine + 1
                    self._in_use += 1
                    return
                left = deadline - time.monotonic()
                if left <= 0:
                    raise self._busy(own=mine >= self.per_caller)
                self._cond.wait(left)

    def release(self, caller: str) -> None:
        with self._cond:
            mine = self._by_caller.get(caller, 0)
            if mine <= 1:
                self._by_caller.pop(caller, None)
            else:
                self._by_caller[caller] = mine - 1
            self._in_use = max(0, self._in_use - 1)
            self._cond.notify_all()

    def in_use(self, caller: str | None = None) -> int:
        """Slots taken (by `caller`, or by everyone)."""
        with self._cond:
            return self._in_use if caller is None else self._by_caller.get(caller, 0)

    def _busy(self, *, own: bool) -> GitBusy:
        waited = f"after waiting {self.wait_s:g} s"
        if own:
            return GitBusy(
                f"too many repository reads at once from you: at most {self.per_caller} run together; "
                f"none finished {waited}. Retry when your other requests have finished",
                retry_after=max(1, math.ceil(self.wait_s / 2)),
                status_code=429,
            )
        return GitBusy(
            f"the server is busy reading repositories for other requests ({self.total} at once); "
            f"none finished {waited}. Retry shortly",
            retry_after=max(1, math.ceil(self.wait_s / 2)),
            status_code=503,
        )


class Claim:
    """One request's hold on the slots, for `caller`: the first git process of the request takes
    a slot, the others (nested or not) share it, the last one to end gives it back."""

    def __init__(self, slots: GitSlots, caller: str):
        self.slots = slots
        self.caller = caller
        self._lock = threading.Lock()
        self._running = 0

    def enter(self) -> None:
        with self._lock:
            if self._running == 0:
                self.slots.acquire(self.caller)  # waits with the lock held: the request's other
            self._running += 1  # processes would share the slot this one is taking anyway

    def exit(self) -> None:
        with self._lock:
            self._running -= 1
            if self._running == 0:
                self.slots.release(self.caller)


_installed: GitSlots | None = None
_claim: contextvars.ContextVar[Claim | None] = contextvars.ContextVar("codesearch_git_claim", default=None)


def install(slots: GitSlots | None) -> None:
    """Limit the callers' git processes in this process with `slots` (None: no limit)."""
    global _installed
    _installed = slots


def installed() -> GitSlots | None:
    return _installed


def claim(caller: str) -> None:
    """Say that the git work from here on, in this context, is done for `caller` (a request's
    work calls this once it knows who asks). Nothing when no slots are installed, or when the
    context already holds a claim (the first caller named stays)."""
    if _installed is not None and _claim.get() is None:
        _claim.set(Claim(_installed, caller))


@contextlib.contextmanager
def hold() -> Iterator[None]:
    """Around one git process: the context's claim holds a slot while it runs (no claim: no wait)."""
    current = _claim.get()
    if current is None:
        yield
        return
    current.enter()
    try:
        yield
    finally:
        current.exit()


def settings_from_environ(environ: Mapping[str, str] | None = None) -> GitSlots:
    """The slots of an API process: ``CODESEARCH_GIT_READS_PER_CALLER`` (default 2),
    ``CODESEARCH_GIT_READS_TOTAL`` (default 2 per CPU, at least 4), ``CODESEARCH_GIT_READS_WAIT_S``
    (default 10). A value that is not a positive number is a ValueError naming the variable."""
    env = os.environ if environ is None else environ
    total_default = max(MIN_TOTAL, TOTAL_PER_CPU * (os.cpu_count() or 1))

    def number(name: str, default: float, *, integer: bool) -> float:
        raw = (env.get(name) or "").strip()
        if not raw:
            return default
        try:
            value = int(raw) if integer else float(raw)
        except ValueError:
            value = -1
        if value <= 0 or (not integer and not math.isfinite(value)):
            kind = "a whole number" if integer else "a number of seconds"
            raise ValueError(f"{name}={raw!r}: give {kind} above 0")
        return value

    return GitSlots(
        per_caller=int(number("CODESEARCH_GIT_READS_PER_CALLER", PER_CALLER, integer=True)),
        total=int(number("CODESEARCH_GIT_READS_TOTAL", total_default, integer=True)),
        wait_s=number("CODESEARCH_GIT_READS_WAIT_S", WAIT_S, integer=False),
    )
