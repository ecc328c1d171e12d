"""Schema errors as short, human lines: ``<json path>: <reason>``.

    connections.myGitlab.groups[2]: expected string
    settings.maxFileSize: must be at least 1
    connections.gh.foo: unknown property "foo" (did you mean "orgs"?)

jsonschema reports a failed ``oneOf``/``anyOf`` as one long message about every branch. Here a
branch is chosen the way a reader would: for connections and models by their discriminator
(`type` / `provider`), for other alternatives (token references, header values) by the one
branch whose shape fits; the errors of that branch are reported instead. When no branch fits,
the problem says which forms are allowed.

No message repeats a value from the file except names the user chose (connection names,
unknown keys, an unknown `type`): a token pasted into the file by mistake never shows up.
"""

from __future__ import annotations

import difflib
import json
import re
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

from jsonschema import Draft7Validator, ValidationError

_IDENT = re.compile(r"^[A-Za-z0-9_$-]+$")
_DISCRIMINATORS = ("type", "provider")
_SHAPE_VALIDATORS = {"type", "required", "const", "enum", "anyOf", "oneOf", "not"}

URL_PATTERN = r"^https?:\/\/[^\s/$.?#].[^\s]*$"
_PATTERN_TEXT = {
    URL_PATTERN: "must be an http:// or https:// URL",
    r"^(https?:\/\/[^\s/$.?#].[^\s]*|file:\/\/\/[^\s]+)$": (
        "must be an http:// or https:// URL, or file:/// followed by an absolute path"
    ),
    r"^[\w.-]+$": 'may only contain letters, digits, "_", "." and "-"',
    r"^[\w.-]+\/[\w.-]+$": 'must be written <owner>/<name> (letters, digits, "_", "." and "-")',
    r"^[\w.-]+\/[\w. -]+$": "must be written <org>/<project>",
    r"^[\w.-]+\/[\w. -]+\/[\w. -]+$": "must be written <org>/<project>/<repo>",
    r"^[a-zA-Z0-9_-]+$": 'may only contain letters, digits, "_" and "-"',
}
_TOKEN_FORMS = '{"env": "<VARIABLE>"} or {"googleCloudSecret": "projects/<p>/secrets/<s>/versions/<v>"}'

#: Where in the document: the keys and indexes from its root.
Path = tuple[str | int, ...]
Problem = tuple[Path, str]  # (path in the document, reason)


def format_path(path: Iterable[Any]) -> str:
    """``("connections", "my gl", "groups", 2)`` → ``connections["my gl"].groups[2]``."""
    out = ""
    for p in path:
        if isinstance(p, int):
            out += f"[{p}]"
        elif _IDENT.match(p):
            out += ("." if out else "") + p
        else:
            out += f"[{json.dumps(p, ensure_ascii=False)}]"
    return out or "(top level)"


def _jtype(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return {str: "string", dict: "object", list: "array", type(None): "null"}.get(type(value), type(value).__name__)


def _describe(branch: dict[str, Any]) -> str:
    """A branch of a oneOf/anyOf in a few words."""
    if "$ref" in branch:
        name = branch["$ref"].rsplit("/", 1)[-1].removesuffix(".json")
        return f"a token reference ({_TOKEN_FORMS})" if name == "Token" else name
    required = branch.get("required") or []
    if branch.get("type") == "object" and len(required) == 1:
        return f'{{"{required[0]}": …}}'
    if "const" in branch:
        return json.dumps(branch["const"])
    t = branch.get("type")
    if isinstance(t, list):
        return " or ".join(t)
    return t or branch.get("title") or "another form"


def _suggest(word: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.7)
    return f' (did you mean "{close[0]}"?)' if close else ""


def explain(error: ValidationError) -> list[Problem]:
    """The problems one jsonschema error stands for (several for an object with unknown keys)."""
    v = error.validator
    path = tuple(error.absolute_path)
    inst = error.instance
    val = error.validator_value
    schema = error.schema if isinstance(error.schema, dict) else {}

    if v in ("oneOf", "anyOf"):
        return _explain_alternatives(error, path)
    if v == "additionalProperties" and isinstance(inst, dict):
        props = schema.get("properties", {})
        pats = schema.get("patternProperties", {})
        out = []
        for key in inst:
            if key in props or any(re.search(p, key) for p in pats):
                continue
            if pats and not props:
                pat = next(iter(pats))
                out.append((path + (key,), f"invalid name: {_PATTERN_TEXT.get(pat, 'must match ' + pat)}"))
            else:
                out.append((path + (key,), f'unknown property "{key}"{_suggest(key, props)}'))
        return out
    if v == "required" and isinstance(inst, dict):
        note = ""
        if "then" in error.absolute_schema_path and schema.get("description"):
            note = f" ({schema['description']})"
        return [(path, f'missing required property "{k}"{note}') for k in val if k not in inst]
    if v == "type":
        expected = " or ".join(val) if isinstance(val, list) else val
        return [(path, f"expected {expected}")]
    if v == "not":
        keys = [
            k
            for alt in (val.get("anyOf") or [val])
            for k in alt.get("required", [])
            if isinstance(inst, dict) and k in inst
        ]
        if keys:
            return [(path + (k,), f"{k} cannot be overridden") for k in keys]
        return [(path, "is not allowed here")]
    simple: dict[str, Callable[[], str]] = {
        "minimum": lambda: f"must be at least {val}",
        "maximum": lambda: f"must be at most {val}",
        "exclusiveMinimum": lambda: f"must be greater than {val}",
        "exclusiveMaximum": lambda: f"must be less than {val}",
        "multipleOf": lambda: f"must be a multiple of {val}",
        "minItems": lambda: f"must have at least {val} item{'s' if val != 1 else ''}",
        "maxItems": lambda: f"must have at most {val} item{'s' if val != 1 else ''}",
        "minLength": lambda: "must not be empty" if val == 1 else f"must be at least {val} characters long",
        "maxLength": lambda: f"must be at most {val} characters long",
        "uniqueItems": lambda: "items must be unique",
        "enum": lambda: "must be one of " + ", ".join(json.dumps(x) for x in val),
        "const": lambda: f"must be {json.dumps(val)}",
        "pattern": lambda: _PATTERN_TEXT.get(val, f"must match the pattern {val}"),
    }
    if v in simple:
        return [(path, simple[v]())]
    return [(path, f"does not satisfy the schema's {v!r} rule")]


def _is_shape_error(e: ValidationError) -> bool:
    """An error saying the value is not of this branch's kind at all (not a detail inside it)."""
    return len(e.relative_path) == 0 and e.validator in _SHAPE_VALIDATORS


def _explain_alternatives(error: ValidationError, path: Path) -> list[Problem]:
    inst = error.instance
    branches_schemas = error.validator_value or []
    by_branch: dict[int, list[ValidationError]] = defaultdict(list)
    for c in error.context or ():
        by_branch[c.relative_schema_path[0]].append(c)
    n = len(branches_schemas)
    if not error.context:  # oneOf valid under several branches
        return [(path, "matches more than one allowed form")]

    # Connections and models: the branch is chosen by the discriminator's value.
    if isinstance(inst, dict):
        for disc in _DISCRIMINATORS:
            if disc not in inst and any(
                c.validator == "required" and not c.relative_path and disc in c.validator_value for c in error.context
            ):
                return [(path, f'missing required property "{disc}"')]
            consts, others = {}, set()
            for i, errs in by_branch.items():
                for c in errs:
                    if c.validator == "const" and list(c.relative_path) == [disc]:
                        consts[i] = c.validator_value
                    elif c.validator == "not" and list(c.relative_path) == [disc]:
                        others.add(i)  # a catch-all branch for values the others do not name
            if not consts:
                continue
            if disc not in inst:
                return [(path, f'missing required property "{disc}"')]
            matching = [i for i in range(n) if i not in consts and i not in others]
            if len(matching) == 1:
                return [p for c in by_branch[matching[0]] for p in explain(c)]
            if not matching:
                allowed = [consts[i] for i in sorted(consts)]
                got = inst[disc]
                hint = _suggest(got, allowed) if isinstance(got, str) else ""
                shown = json.dumps(got, ensure_ascii=False) if isinstance(got, (str, int, float, bool)) else _jtype(got)
                return [(path + (disc,), f"unknown {disc} {shown}{hint}; expected one of " + ", ".join(allowed))]

    # Other alternatives: the one branch whose shape fits, if exactly one does.
    fitting = [i for i in range(n) if not any(_is_shape_error(c) for c in by_branch.get(i, []))]
    if len(fitting) == 1:
        return [p for c in by_branch[fitting[0]] for p in explain(c)]
    forms = [_describe(b) for b in branches_schemas if isinstance(b, dict)]
    required_sets = {tuple(b.get("required") or ()) for b in branches_schemas if isinstance(b, dict)}
    if required_sets == {("env",), ("googleCloudSecret",)}:
        message = f"expected a token reference: {_TOKEN_FORMS}"
    else:
        message = "expected " + " or ".join(forms)
    if isinstance(inst, str) and "token" in message:
        message += " (the file says where the token is read from; it never holds the token itself)"
    return [(path, message)]


def document_order(doc: Any, path: Path) -> list[int]:
    """A sort key that puts problems in the order their places appear in the document."""
    key, node = [], doc
    for p in path:
        if isinstance(node, dict) and p in node:
            key.append(list(node).index(p))
            node = node[p]
        elif isinstance(node, list) and isinstance(p, int) and 0 <= p < len(node):
            key.append(p)
            node = node[p]
        else:
            key.append(1 << 30)
            node = None
    return key


def collect(validator: Draft7Validator, doc: Any) -> list[str]:
    """Every problem of `doc`, in document order, each once, as ``"<path>: <reason>"``."""
    problems: list[Problem] = []
    for error in validator.iter_errors(doc):
        problems.extend(explain(error))
    problems.sort(key=lambda p: document_order(doc, p[0]))
    seen, out = set(), []
    for path, reason in problems:
        line = f"{format_path(path)}: {reason}"
        if line not in seen:
            seen.add(line)
            out.append(line)
    return out
