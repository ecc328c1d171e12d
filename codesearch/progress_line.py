"""One line of progress for the command line: rewritten in place on a terminal, a plain line per
update anywhere else (a log file, a pipe), where carriage returns would pile up.

`codesearch sync` shows each repository of a connection with it, `codesearch serve` each
repository of its first sync."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TextIO


class ProgressLine:
    """`show(line)` per update, `end()` when done. `plain`, when given, takes the lines instead
    of `stream` and the line is never rewritten (e.g. `print` of a command that writes its own
    output)."""

    def __init__(self, stream: TextIO | None = None, plain: Callable[[str], None] | None = None):
        self.stream = stream or sys.stderr  # the stream of now, not of import time
        self.plain = plain
        self.tty = plain is None and self.stream.isatty()
        self.width = 0

    def show(self, line: str) -> None:
        if not self.tty:
            if self.plain is not None:
                self.plain(line)
            else:
                self.stream.write(line + "\n")
                self.stream.flush()
            return
        self.stream.write("\r" + line.ljust(self.width))
        self.stream.flush()
        self.width = len(line)

    def end(self, clear: bool = False) -> None:
        """Leave the rewritten line: erase it (`clear`) or keep it and start a new line."""
        if self.tty and self.width:
            self.stream.write("\r" + " " * self.width + "\r" if clear else "\n")
            self.stream.flush()
            self.width = 0
