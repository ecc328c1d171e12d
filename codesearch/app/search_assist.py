"""Search assist (Sourcebot 4.13's "AI Search Assist"): a description in plain words turned into
a query of our query language by the configured language model, checked by our parser.

As in Sourcebot, the model is the first of the config's ``models`` unless the request names one
(``languageModel``: provider and model, as `ask_codebase` takes it), and the model is told the
query language and asked for the query alone. What it answers is cleaned (code fences, quotes
around the whole, a leading ``query:`` label, all but the first non-empty line dropped), then
parsed as the search page would parse it: the answer says whether it parses and, if not, where
and why, so the page shows a query the user can fix instead of one that would fail on search.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from codesearch.errors import InvalidRequestBody, QueryParseError
from codesearch.llm.client import ModelClient, ModelSpec
from codesearch.query.parser import parse

if TYPE_CHECKING:
    import httpx

#: the longest description accepted (characters) and the longest query kept
MAX_PROMPT = 2000
MAX_QUERY = 1000

SYSTEM_PROMPT = """You are a search query translator for codesearch, a code search engine.
Convert the user's description of what they are looking for into one codesearch query.

The query language:
- Bare words are searched in file contents; several words must all occur in the file (AND).
- "a phrase" searches for the exact phrase; /regex/ searches for a regular expression.
- `or` between terms means either; a leading `-` excludes: -file:test, -(mock or fake).
- Parentheses group terms: (foo or bar) baz.
- file:REGEX matches the file's path (file:\\.ts$, file:^src/).
- repo:REGEX matches the repository's full name (repo:^github\\.com/acme/api$).
- lang:NAME filters by language (lang:python, lang:go, lang:typescript).
- sym:REGEX finds files that define a symbol of that name (sym:^Searcher$).
- rev:NAME searches branches or tags whose name contains NAME.
- case:yes makes the search case-sensitive; archived:no and fork:no leave out archived or forked repositories.

Instructions:
- Output ONLY the query string: no explanation, no markdown, no code fences, no surrounding text.
- Use the most specific filters that match the user's intent.
- Use regular expressions when the user implies patterns, ranges or variations.
- Keep the query as simple as possible while capturing the intent."""

_FENCE = re.compile(r"^```[\w-]*\s*|\s*```$")
_LABEL = re.compile(r"^(?:query|search query)\s*:\s*", re.I)


@dataclass
class Translation:
    query: str
    valid: bool
    #: why the query does not parse (the parser's message, with its position), None when it does
    error: str | None
    model: dict[str, str]

    def json(self) -> dict[str, Any]:
        return {"query": self.query, "isValid": self.valid, "error": self.error, "model": self.model}


def check_prompt(prompt: object) -> str:
    """The description, trimmed; InvalidRequestBody when it is empty or too long."""
    if not isinstance(prompt, str) or not prompt.strip():
        raise InvalidRequestBody("prompt: describe what you are looking for (a non-empty string)")
    if len(prompt) > MAX_PROMPT:
        raise InvalidRequestBody(f"prompt: at most {MAX_PROMPT} characters (got {len(prompt)})")
    return prompt.strip()


def clean(answer: str) -> str:
    """The query in the model's answer: fences, a ``query:`` label and quotes or backticks around
    the whole removed; the first non-empty line; at most `MAX_QUERY` characters."""
    text = _FENCE.sub("", (answer or "").strip()).strip()
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    line = _LABEL.sub("", line)
    if len(line) >= 2 and line[0] == line[-1] and line[0] == "`":
        line = line[1:-1].strip()
    return line[:MAX_QUERY]


def validate(query: str) -> str | None:
    """None when `query` parses; else the parser's message."""
    if not query:
        return "the model gave no query: describe what you are looking for in other words"
    try:
        parse(query)
    except QueryParseError as e:
        return str(e)
    return None


def choose(entries: list[dict[str, Any]], wanted: dict[str, Any] | None) -> ModelSpec:
    """The model named by `wanted` (provider and model), else the first configured one."""
    if not entries:
        raise InvalidRequestBody("No language models are configured: search assist needs one (config `models`).")
    if not wanted:
        return ModelSpec.from_config(entries[0])
    for entry in entries:
        if (entry.get("provider"), entry.get("model")) == (wanted.get("provider"), wanted.get("model")):
            return ModelSpec.from_config(entry)
    known = ", ".join(f"{e.get('provider')}/{e.get('model')}" for e in entries)
    raise InvalidRequestBody(
        f"languageModel: {wanted.get('provider')}/{wanted.get('model')} is not configured; configured: {known}"
    )


def translate(
    store: Any, prompt: str, language_model: dict[str, Any] | None = None, *, http: httpx.Client | None = None
) -> Translation:
    """Ask the model for the query of `prompt` and check it (see the module docstring).
    InvalidRequestBody when no model is configured (or the one named is not), `ModelError` when
    the model fails."""
    spec = choose(store.list_language_models() if store is not None else [], language_model)
    messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": check_prompt(prompt)}]
    with ModelClient(spec, http=http) as client:
        reply = client.chat(messages)
    query = clean(reply.text or "")
    error = validate(query)
    return Translation(query, error is None, error, spec.public())
