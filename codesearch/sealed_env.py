"""Environment variables handed to Ray actors and Serve replicas as a constructor argument, never
through Ray's ``runtime_env``.

Why not ``runtime_env={"env_vars": ...}``: Ray writes a runtime env in clear text where others can
read it. The runtime env agent of every node logs each one it sets up, values included, in
``runtime_env_agent.log`` (mode 0644, readable by every user of the node), and the dashboard shows
it to whoever reaches it (the state API's actors and tasks, Serve's view of its applications).
The forwarded environment holds the server secret, the webhook secrets, ``DATABASE_URL`` and the
config's ``environmentOverrides`` (tokens among them). A constructor argument is pickled into the
actor's creation task and, for a Serve replica, into Serve's checkpoint of its deployments, both
kept by Ray's GCS (in memory, or in its Redis when GCS fault tolerance is configured): Ray logs
neither at its default log levels (``tests/service/test_security_secrets.py`` searches every file of a
session and the dashboard's answers for the values).

A `SealedEnv` never shows its values: its repr names the variables only, so a log line, an error
or a traceback that prints it (or the `ServiceSpec` holding it) tells nothing secret. The process
it is handed to calls `apply` first thing in its constructor, before anything reads the
environment; an actor Ray restarts runs its constructor again, and so applies it again.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass

from codesearch.plurals import plural


@dataclass(frozen=True, repr=False)
class SealedEnv:
    """Environment variables (name, value), sorted by name; `of` makes one from a mapping."""

    items: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, values: Mapping[str, str]) -> SealedEnv:
        return cls(tuple(sorted((str(name), str(value)) for name, value in values.items())))

    def names(self) -> list[str]:
        return [name for name, _ in self.items]

    def apply(self, environ: MutableMapping[str, str] | None = None) -> None:
        """Set the variables in `environ` (default: this process's environment), over what the node set."""
        (os.environ if environ is None else environ).update(self.items)

    def __len__(self) -> int:
        return len(self.items)

    def __repr__(self) -> str:
        if not self.items:
            return "SealedEnv(no variables)"
        return f"SealedEnv({plural(len(self.items), 'variable')}: {', '.join(self.names())})"

    __str__ = __repr__
