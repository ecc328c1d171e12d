"""The pages' JavaScript modules and the modules each one imports, for ``<link rel=modulepreload>``.

The scripts under ``static/`` are native ES modules (no build step). A browser finds a module's
imports only once it has fetched the module, so a page whose module imports ``dom.js`` and
``http.js`` would take one more round trip before it runs; on the search results page, that is
one more before its results stream starts. The template macro ``page_module`` (``_module.html``)
therefore writes a ``modulepreload`` link for every module the page's module imports, directly or
not, as `imports_of` reads them from the files: no list to keep in step with the code.
"""

from __future__ import annotations

import functools
import os
import re

from codesearch.web.assets import STATIC_DIR

#: ``import {a, b} from "./x.js";``, ``import "./x.js";`` (what the modules write: relative, one a line)
_IMPORT = re.compile(r"""^\s*import\s+(?:[^'";]*?\s+from\s+)?["']\./([\w.-]+\.js)["']""", re.MULTILINE)


def direct_imports(name: str, static_dir: str = STATIC_DIR) -> list[str]:
    """The modules `name` (a file of `static_dir`) imports itself, in the order it names them."""
    with open(os.path.join(static_dir, name), encoding="utf-8") as f:
        return list(dict.fromkeys(_IMPORT.findall(f.read())))


@functools.cache
def imports_of(name: str, static_dir: str = STATIC_DIR) -> tuple[str, ...]:
    """Every module `name` needs before it runs (its imports, theirs, …), each once, `name`
    itself excluded. Read once per process: the static files do not change while it runs."""
    seen: dict[str, None] = {}
    todo = direct_imports(name, static_dir)
    while todo:
        module = todo.pop(0)
        if module in seen or module == name:
            continue
        seen[module] = None
        todo.extend(direct_imports(module, static_dir))
    return tuple(seen)
