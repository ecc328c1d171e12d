"""CSV that a spreadsheet opens as data, never as formulas (CSV injection).

Excel, LibreOffice and Google Sheets run a cell that starts with ``=``, ``+``, ``-`` or ``@`` as a
formula, and some treat a leading tab or carriage return the same way once they strip it: a
query, a path or an e-mail that someone else typed could then compute, link out or run a command
on the machine of the owner who opened the download. Every CSV the service writes for people to
open (an insight's counts, the usage report) goes through `safe_cell` (or `write_rows`), which
puts an apostrophe in front of such text: spreadsheets show the text as typed and keep the
apostrophe as a marker, not a character. Numbers are written as numbers (a negative count is a
number, not a formula). The batch command's CSV is a data file for analysis tools and is written
as it is (docs/batch.md#csv-cells says why).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence

__all__ = ["FORMULA_STARTS", "csv_text", "safe_cell"]

#: The first characters that make a spreadsheet read a cell as a formula.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def safe_cell(value: object) -> object:
    """`value` as a cell: text that starts like a formula gets a leading ``'``; numbers, booleans
    and None (an empty cell) are kept as they are."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    text = str(value)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def csv_text(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A CSV document (``\\n`` line ends): `header`, then `rows`, every cell through `safe_cell`."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow([safe_cell(h) for h in header])
    for row in rows:
        w.writerow([safe_cell(c) for c in row])
    return out.getvalue()
