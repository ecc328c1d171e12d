"""Typed actor handles: what mypy knows of a method called through Ray.

Ray's stubs give an `ActorHandle` no methods: every attribute of a handle is `Never`, so mypy
takes ``ray.get(handle.ping.remote())`` for code that never returns and silently stops checking
the rest of the function. Each actor module of the runtime therefore declares, for mypy only, a
subclass of `ActorHandle` (of `RuntimeHandle` for the actors `workers.stop_workers` stops) naming
the methods its callers use as `Method` attributes, e.g.::

    if TYPE_CHECKING:
        class CompactorHandle(RuntimeHandle[CompactorActor]):
            ping: Method[bool]

A `CompactorHandle` is still an `ActorHandle` (``ray.kill`` takes it); ``ray.get`` of
``handle.ping.remote()`` is a `bool`. Ray types the result of ``ray.remote(cls).remote(...)``
as "a handle or the class" and ``ray.get_actor`` as a bare handle, so the one place that makes
or looks up an actor states its handle type with a `cast`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from ray import ObjectRef
    from ray.actor import ActorHandle

R = TypeVar("R")
T = TypeVar("T")


class Method(Protocol[R]):
    """An actor's method as its handle shows it: ``remote(...)`` runs it in the actor and answers
    a reference to what it returns (an `R`)."""

    def remote(self, *args: Any, **kwargs: Any) -> ObjectRef[R]: ...


if TYPE_CHECKING:

    class RuntimeHandle(ActorHandle[T]):
        """A handle to an actor of the runtime (a `T`): each answers `ping` once started and
        finishes its work at `shutdown` (`workers.stop_workers` stops them all alike)."""

        ping: Method[Any]
        shutdown: Method[Any]
