"""Accessibility audits of pages with axe-core, for any Playwright test.

    from tests.a11y import audit, describe

    problems = audit(page)            # the page as it is now
    assert not problems, describe(problems)

axe-core comes from npm into the git-ignored ``.tools/`` (``make axe``, a dependency of ``make
test``), pinned like the MCP Inspector; nothing here skips when it is missing: the test fails
and says how to install it. The pages' Content-Security-Policy allows no inline script, so axe
is not added as a ``<script>``: its source is evaluated through the DevTools protocol
(`page.evaluate`), which the policy does not govern, and the page is otherwise untouched.

`audit` returns the violations of at least `min_impact` (axe's impacts: minor < moderate <
serious < critical) as plain dicts: ``{"id", "impact", "help", "nodes": [{"target", "html",
"summary"}]}``.
"""

from __future__ import annotations

import json
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
AXE_JS = ROOT / ".tools" / "node_modules" / "axe-core" / "axe.min.js"
IMPACTS = ("minor", "moderate", "serious", "critical")

_source: str | None = None


def axe_source() -> str:
    global _source
    if _source is None:
        if not AXE_JS.is_file():
            raise FileNotFoundError(f"{AXE_JS} is missing: run `make axe` (or `make test`) to install axe-core")
        _source = AXE_JS.read_text(encoding="utf-8")
    return _source


#: The axe rules whose answer depends on colours: what a page in its other colour scheme (the
#: same page, CSS ``prefers-color-scheme`` only) can fail that it passed in the first.
COLOUR_RULES = ("color-contrast", "link-in-text-block")


def audit(page, *, min_impact: str = "serious", rules_off: tuple[str, ...] = (), selector: str | None = None,
          only: tuple[str, ...] = ()) -> list[dict]:
    """The axe-core violations on `page` (optionally within `selector`) of impact `min_impact` or
    worse, rules `rules_off` not run; with `only`, those rules alone."""
    if not page.evaluate("() => typeof window.axe === 'object'"):
        page.evaluate(axe_source() + "\n;void 0")
    options = {"resultTypes": ["violations"], "rules": {r: {"enabled": False} for r in rules_off}}
    if only:
        options["runOnly"] = {"type": "rule", "values": list(only)}
    result = page.evaluate("""async ([selector, options]) => {
        const r = await axe.run(selector ? document.querySelector(selector) : document, options);
        return r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help, helpUrl: v.helpUrl,
            nodes: v.nodes.map(n => ({target: n.target, html: n.html.slice(0, 300), summary: n.failureSummary}))}));
    }""", [selector, options])
    floor = IMPACTS.index(min_impact)
    return [v for v in result if v["impact"] in IMPACTS and IMPACTS.index(v["impact"]) >= floor]


def describe(violations: list[dict], limit: int = 5) -> str:
    """A readable account of `violations` for an assertion message."""
    out = []
    for v in violations:
        out.append(f"[{v['impact']}] {v['id']}: {v['help']} ({v['helpUrl']})")
        for n in v["nodes"][:limit]:
            out.append(f"    {json.dumps(n['target'])}: {n['html']}")
            if n.get("summary"):
                out.extend("      " + line for line in n["summary"].splitlines())
        if len(v["nodes"]) > limit:
            out.append(f"    … and {len(v['nodes']) - limit} more")
    return "\n".join(out)
