"""The package's import graph, read with `ast`: every ``import codesearch…`` and ``from codesearch… import``,
module-level or inside a function, except those under ``if TYPE_CHECKING:``.

Run it to print the layout (packages, lines), the strongly connected components and the module sizes:
    python -m tests.import_graph
"""
from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "codesearch"


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST, here: str, is_pkg: bool, known: set[str], annotations: bool = False) -> set[str]:
    out: set[str] = set()

    def resolve(name: str) -> str | None:
        # the longest known module that prefixes name
        while name:
            if name in known:
                return name
            name = name.rpartition(".")[0]
        return None

    def visit(node: ast.AST) -> None:
        if not annotations and isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("codesearch") and (m := resolve(alias.name)):
                    out.add(m)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here.split(".") if is_pkg else here.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod.startswith("codesearch"):
                for alias in node.names:
                    m = resolve(f"{mod}.{alias.name}") or resolve(mod)
                    if m:
                        out.add(m)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    out.discard(here)
    return out


def graph(annotations: bool = False) -> dict[str, set[str]]:
    """Module → the modules it imports; with `annotations`, those under ``if TYPE_CHECKING:`` too."""
    mods = modules()
    known = set(mods)
    return {name: _imports(ast.parse(path.read_text()), name, path.name == "__init__.py", known, annotations)
            for name, path in mods.items()}


def strongly_connected(g: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative; components of two or more modules (or a self-loop)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    comps: list[list[str]] = []
    counter = 0
    for root in g:
        if root in index:
            continue
        work = [(root, iter(sorted(g[root])))]
        index[root] = low[root] = counter; counter += 1
        stack.append(root); on_stack.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in g:
                    continue
                if w not in index:
                    index[w] = low[w] = counter; counter += 1
                    stack.append(w); on_stack.add(w)
                    work.append((w, iter(sorted(g[w]))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop(); on_stack.discard(w); comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        comps.append(sorted(comp))
    return comps


def package_of(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2])


if __name__ == "__main__":
    g = graph()
    mods = modules()
    lines = {m: len(p.read_text().splitlines()) for m, p in mods.items()}
    pk: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for m in mods:
        pk[package_of(m)][0] += 1
        pk[package_of(m)][1] += lines[m]
    print(f"{len(mods)} modules, {sum(lines.values())} lines, {sum(len(v) for v in g.values())} import arrows")
    for p, (n, l) in sorted(pk.items()):
        print(f"  {p:34} {n:3} modules {l:6} lines")
    comps = strongly_connected(g)
    print(f"{len(comps)} import cycles (strongly connected components):")
    for c in comps:
        print(f"  {len(c)} modules: {', '.join(c)}")
    pg: dict[str, set[str]] = defaultdict(set)
    for m, deps in g.items():
        for d in deps:
            if package_of(d) != package_of(m):
                pg[package_of(m)].add(package_of(d))
    pcomps = strongly_connected({p: pg.get(p, set()) for p in pk})
    print(f"{len(pcomps)} package cycles:")
    for c in pcomps:
        print(f"  {', '.join(c)}")
    big = sorted(((l, m) for m, l in lines.items() if l > 600), reverse=True)
    print(f"{len(big)} modules over 600 lines: " + ", ".join(f"{m} ({l})" for l, m in big))
    sys.exit(0)
