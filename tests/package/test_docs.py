"""The documentation site: it builds, and what the code says about it is true.

* `mkdocs build --strict` succeeds: every page is in the nav and every link between pages, and
  every anchor a link names, resolves (mkdocs.yml's `validation`).
* Every reference from the code, tests, benchmarks and top-level files to a page
  (``docs/<page>.md`` or ``docs/<page>.md#<anchor>``, in a comment, a docstring or the README)
  names a page that exists and a heading anchor of the built page.
* Facts the pages state that the code also states agree: the index format versions, every MCP
  tool and its parameters, every setting and connection field of the config schema.
* No file points at the product documents that are not in the repository.
* The README stays a short entrance: at most `README_MAX_LINES` lines, the quick-start commands,
  links that resolve; every section the long README had lives on at a page and heading of docs/
  (`MOVED_SECTIONS`), and the home page links every page.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"

#: Where references to docs/ pages are looked for (docs/ itself is checked by mkdocs).
SCANNED = ("codesearch", "bench", "tests", "notebooks", "README.md", "cluster.yaml", "serve_config.yaml", "Makefile",
           "pyproject.toml", "mkdocs.yml")
SCANNED_SUFFIXES = {".py", ".md", ".yaml", ".yml", ".toml", ".js", ".html", ".css", ".json", ".ipynb", ""}
#: Files named docs/… inside the git repositories the tests build (not pages of ours).
FIXTURE_FILES = {"docs/guide.md", "docs/manual.md", "docs/hello.md"}
REFERENCE = re.compile(r"(?<![\w/.-])docs/([\w.-]+\.(?:md|json))(?:#([\w-]+))?")
ID = re.compile(r'\bid="([^"]+)"')

#: Product documents that live outside the repository: nothing may point at them.
OUTSIDE = re.compile(r"\bSPEC\b|\bENGINEERING\.md\b|\bseed\.md\b|\bHOSTS\.md\b|\.\./shared/")


def scanned_files() -> list[Path]:
    """The repository's own files under `SCANNED` (``git ls-files``: never the benchmark corpus,
    caches or anything else git ignores)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--", *SCANNED], cwd=ROOT, capture_output=True, check=True,
                            timeout=60).stdout.decode().split("\0")
    files = [ROOT / name for name in listed if name]
    return [p for p in files if p.is_file() and (p.suffix in SCANNED_SUFFIXES or p.name in SCANNED)
            and "output" not in p.relative_to(ROOT).parts[:2] and p != Path(__file__).resolve()]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"),
                           "--site-dir", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stdout}\n{proc.stderr}"
    return out


def anchors(site: Path, page: str) -> set[str]:
    """The element ids of a built page (use_directory_urls is off: docs/x.md → x.html)."""
    return set(ID.findall((site / (page[:-3] + ".html")).read_text(encoding="utf-8")))


def test_the_site_builds_with_every_page_in_it(site):
    pages = sorted(p.name for p in DOCS.glob("*.md"))
    assert pages, "no pages"
    for page in pages:
        assert (site / (page[:-3] + ".html")).is_file(), page


def test_every_reference_to_a_page_names_a_page_and_a_heading(site):
    found, broken = 0, []
    for path in scanned_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        for m in REFERENCE.finditer(text):
            page, anchor = m.group(1), m.group(2)
            where = f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}"
            if f"docs/{page}" in FIXTURE_FILES and path.relative_to(ROOT).parts[0] == "tests":
                continue
            found += 1
            if not (DOCS / page).is_file():
                broken.append(f"{where}: no such page")
            elif anchor and (not page.endswith(".md") or anchor not in anchors(site, page)):
                broken.append(f"{where}: no heading with the anchor #{anchor}")
    assert not broken, "\n".join(broken)
    assert found >= 20, f"only {found} references to docs/ pages: is the pattern still right?"


@pytest.mark.slow  # over 1 s of the fast lane: `make test` runs it (tests/conftest.py, SLOW_MODULES)
def test_nothing_points_outside_the_repository():
    files = scanned_files() + sorted(DOCS.glob("*.md"))
    offending = {}
    for path in files:
        rel = str(path.relative_to(ROOT))
        lines = [f"{rel}:{i}: {line.strip()}" for i, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
                 if OUTSIDE.search(line)]
        if lines:
            offending[rel] = lines
    assert not offending, "point these at docs/ pages instead:\n" + "\n".join(sum(offending.values(), []))


def test_the_index_format_page_states_the_versions_of_the_code():
    from codesearch.index import format as shard_format
    from codesearch.index import manifest

    text = (DOCS / "index-format.md").read_text()
    for name, value in (("codesearch.index.format.FORMAT_VERSION", shard_format.FORMAT_VERSION),
                        ("codesearch.index.manifest.FORMAT", manifest.FORMAT)):
        row = re.search(rf"^\|[^|\n]*\| `{re.escape(name)}` \| (\d+) \|$", text, re.M)
        assert row, f"index-format.md has no version row for {name}"
        assert int(row.group(1)) == value, f"index-format.md says {name} is {row.group(1)}, the code {value}"
    assert f"- **{shard_format.FORMAT_VERSION}**:" in text, "the version log does not describe the current version"


def sections(text: str, level: str) -> dict[str, str]:
    """Heading text → the text under it, for the headings of one level (``"###"``)."""
    parts = re.split(rf"^{level} (.+)$", text, flags=re.M)
    return {parts[i].strip(): parts[i + 1] for i in range(1, len(parts), 2)}


def test_the_mcp_page_describes_every_tool_and_parameter():
    from codesearch.tools import catalog

    tools = sections((DOCS / "mcp-tools.md").read_text(), "###")
    missing = []
    for spec in catalog.TOOLS:
        body = tools.get(f"`{spec.name}`")
        if body is None:
            missing.append(f"tool {spec.name}")
            continue
        missing += [f"{spec.name}: parameter {p.name}" for p in catalog.parameters(spec) if f"`{p.name}`" not in body]
    extra = set(tools) - {f"`{t.name}`" for t in catalog.TOOLS}
    assert not missing and not extra, f"missing from mcp-tools.md: {missing}; not tools: {sorted(extra)}"


def test_the_configuration_page_names_every_setting_and_connection_field():
    schemas = ROOT / "codesearch" / "config" / "schemas" / "v3"
    text = (DOCS / "configuration.md").read_text()
    names = set(json.loads((schemas / "shared.json").read_text())["definitions"]["Settings"]["properties"])
    for kind in ("github", "gitlab", "gitea", "gerrit", "bitbucket", "azuredevops", "genericGitHost"):
        schema = json.loads((schemas / f"{kind}.json").read_text())
        names |= set(schema["properties"])
        names |= set(schema["properties"].get("exclude", {}).get("properties", {}))
    missing = sorted(n for n in names if f"`{n}`" not in text)
    assert not missing, f"configuration.md does not mention: {missing}"


# ---------------------------------------------------------------------- the README, an entrance to docs/

README = ROOT / "README.md"
#: The README is a short entrance (what it is, the quick start, a tour, links); the rest is in docs/.
README_MAX_LINES = 120
#: The quick start, kept word for word.
QUICK_START = (
    "make serve   # set up .venv, then run the service on an offline demo at http://127.0.0.1:3000",
    "make test    # set up .venv, Debian packages and test tools, run every test",
)
#: Every section of the long README (784 lines, before issue 26) → the page and heading of docs/
#: where its content lives now.
MOVED_SECTIONS = [
    ("## Quick start", "getting-started.md#install"),
    ("## The service", "cli.md#serve"),
    ("## The web UI", "web-ui.md#pages"),
    ("## For AI agents: the MCP server", "mcp-tools.md#connecting-a-client"),
    ("### Signing in with OAuth instead of an API key", "mcp-tools.md#signing-in-with-oauth"),
    ("## From Python and notebooks", "python-client.md#three-back-ends"),
    ("## Configuration and code hosts", "configuration.md#connection-kinds"),
    ("### Single sign-on and account linking (`identityProviders`)", "sign-in.md#configuring-providers"),
    ("## Environment variables", "configuration.md#environment-variables"),
    ("## Query language", "query-language.md#syntax"),
    ("## Deploying on a Ray cluster", "cluster.md#starting-a-cluster"),
    ("## Architecture", "architecture.md#the-layers"),
    ("## Tests and benchmarks", "development.md#tests"),
]
#: A Markdown link's target: ``[text](target)``.
MD_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def test_the_readme_is_short_and_keeps_the_quick_start():
    text = README.read_text(encoding="utf-8")
    lines = len(text.splitlines())
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines, at most {README_MAX_LINES}: move the rest to docs/"
    missing = [command for command in QUICK_START if command not in text.splitlines()]
    assert not missing, f"README.md lost its quick start: {missing}"


@pytest.mark.parametrize(("heading", "target"), MOVED_SECTIONS, ids=[h for h, _ in MOVED_SECTIONS])
def test_each_section_of_the_long_readme_lives_on_in_docs(site, heading, target):
    page, anchor = target.split("#")
    assert (DOCS / page).is_file(), f"{heading!r} moved to {target}: no such page"
    assert anchor in anchors(site, page), f"{heading!r} moved to {target}: the page has no heading #{anchor}"
    assert page in home_links(), f"{heading!r} moved to {page}, which the home page (docs/index.md) does not link"


def test_every_link_of_the_readme_resolves(site):
    targets = MD_LINK.findall(README.read_text(encoding="utf-8"))
    broken = []
    for target in targets:
        if target.startswith("https://"):
            continue
        path, _, anchor = target.partition("#")
        if not (ROOT / path).exists():
            broken.append(f"{target}: no such file")
        elif anchor and not (path.startswith("docs/") and anchor in anchors(site, path.removeprefix("docs/"))):
            broken.append(f"{target}: no heading with the anchor #{anchor}")
    assert not broken, "README.md links that do not resolve:\n" + "\n".join(broken)
    assert "docs/index.md" in targets, "README.md does not link the documentation's home page"
    assert len({t for t in targets if t.startswith("docs/")}) >= 10, f"README.md links few pages: {targets}"


def home_links() -> set[str]:
    """The pages docs/index.md links to (without anchors)."""
    return {t.partition("#")[0] for t in MD_LINK.findall((DOCS / "index.md").read_text(encoding="utf-8"))}


def test_the_home_page_links_every_page():
    pages = {p.name for p in DOCS.glob("*.md")} - {"index.md"}
    assert not pages - home_links(), f"docs/index.md does not link: {sorted(pages - home_links())}"
