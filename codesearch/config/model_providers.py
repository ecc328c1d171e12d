"""The model providers of the config schema: how codesearch talks to each, and what it does with
each field of a `models` entry.

Four wire dialects cover the twelve providers:

=====================  ===================================================================
dialect                providers
=====================  ===================================================================
chat-completions       openai, openai-compatible, deepseek, mistral, openrouter, xai, azure
anthropic-messages     anthropic, google-vertex-anthropic
gemini                 google-generative-ai, google-vertex
bedrock-converse       amazon-bedrock
=====================  ===================================================================

A field of an entry is either sent to the provider (`Provider.sends` says where), used to reach
it (credentials, base URL, region...), or accepted and ignored: `Provider.ignores` says why,
and `check_model` turns every ignored field present in an entry into a warning, so nothing is
dropped silently. Providers that need an optional library (`Provider.needs`) are refused by
`check_model` when it is not installed, naming the entry, the provider and the fix.

Kept free of imports beyond the standard library: the config loader uses it.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

CHAT_COMPLETIONS = "chat-completions"
ANTHROPIC_MESSAGES = "anthropic-messages"
GEMINI = "gemini"
BEDROCK_CONVERSE = "bedrock-converse"

#: Fields every entry may have that are accepted and not used, with why.
COMMON_IGNORED = {
    "inputModalities": "ask_codebase sends text only, so the model's other input kinds are never used",
    "supportedDocumentTypes": "ask_codebase sends no documents",
}
_RESPONSES_ONLY = (
    "a parameter of OpenAI's Responses API; codesearch speaks Chat Completions, which has no reasoning summaries"
)


@dataclass(frozen=True)
class Provider:
    name: str
    dialect: str
    #: Default base URL; None when it is derived from other fields or required.
    base_url: str | None = None
    #: The variable read when the entry has no `token`.
    token_env: str | None = None
    #: Provider-specific fields sent to the provider, and where they go.
    sends: Mapping[str, str] = field(default_factory=dict)
    #: Provider-specific fields accepted but not used, and why.
    ignores: Mapping[str, str] = field(default_factory=dict)
    #: An optional module the provider needs: (module to import, what to install).
    needs: tuple[str, str] | None = None


_GOOGLE_AUTH = ("google.auth", 'the Google auth library: pip install "codesearch-ray[gcp]"')
_THINKING = {
    "thinkingLevel": "generationConfig.thinkingConfig.thinkingLevel",
    "thinkingBudget": "generationConfig.thinkingConfig.thinkingBudget",
}

PROVIDERS: dict[str, Provider] = {
    p.name: p
    for p in (
        Provider(
            "openai",
            CHAT_COMPLETIONS,
            "https://api.openai.com/v1",
            "OPENAI_API_KEY",
            sends={"reasoningEffort": "reasoning_effort"},
            ignores={"reasoningSummary": _RESPONSES_ONLY},
        ),
        Provider(
            "openai-compatible",
            CHAT_COMPLETIONS,
            sends={
                "queryParams": "the query string",
                "reasoningTag": "(reasoning between these tags is cut from answers)",
            },
        ),
        Provider("deepseek", CHAT_COMPLETIONS, "https://api.deepseek.com/v1", "DEEPSEEK_API_KEY"),
        Provider("mistral", CHAT_COMPLETIONS, "https://api.mistral.ai/v1", "MISTRAL_API_KEY"),
        Provider("openrouter", CHAT_COMPLETIONS, "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY"),
        Provider("xai", CHAT_COMPLETIONS, "https://api.x.ai/v1", "XAI_API_KEY"),
        Provider(
            "azure",
            CHAT_COMPLETIONS,
            None,
            "AZURE_API_KEY",
            sends={"reasoningEffort": "reasoning_effort", "apiVersion": "the api-version query parameter"},
            ignores={"reasoningSummary": _RESPONSES_ONLY},
        ),
        Provider(
            "anthropic",
            ANTHROPIC_MESSAGES,
            "https://api.anthropic.com",
            "ANTHROPIC_API_KEY",
            sends={"authToken": "the Authorization: Bearer header"},
        ),
        Provider("google-vertex-anthropic", ANTHROPIC_MESSAGES, needs=_GOOGLE_AUTH),
        Provider(
            "google-generative-ai",
            GEMINI,
            "https://generativelanguage.googleapis.com/v1beta",
            "GOOGLE_GENERATIVE_AI_API_KEY",
            sends=_THINKING,
        ),
        Provider("google-vertex", GEMINI, sends=_THINKING, needs=_GOOGLE_AUTH),
        Provider("amazon-bedrock", BEDROCK_CONVERSE),
    )
}

#: Every provider of the config schema, in the order above.
SUPPORTED_PROVIDERS: tuple[str, ...] = tuple(PROVIDERS)


def missing_dependency(provider: str) -> str | None:
    """What to install for `provider` when an optional library it needs is missing, else None."""
    p = PROVIDERS.get(provider)
    if p is None or p.needs is None:
        return None
    module, what = p.needs
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing, or a module set to None
        found = False
    return None if found else what


def usable_providers() -> list[str]:
    """The providers this installation can talk to."""
    return [name for name in PROVIDERS if missing_dependency(name) is None]


def check_model(where: str, entry: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """(problems, warnings) of one schema-valid `models` entry; `where` names it (``models[2]``).

    A problem means the model cannot be used on this server at all (a start-up refusal); a
    warning names a field that is accepted and not used.
    """
    name = entry.get("provider")
    provider = PROVIDERS.get(name)  # type: ignore[arg-type]
    if provider is None:
        return [f'{where}.provider: provider "{name}" is not supported (supported: {", ".join(PROVIDERS)})'], []
    problems = []
    what = missing_dependency(provider.name)
    if what:
        problems.append(
            f'{where}: provider "{provider.name}" needs {what} (usable without it: {", ".join(usable_providers())})'
        )
    ignored = {**COMMON_IGNORED, **provider.ignores}
    warnings = [f"{where}.{key}: accepted but not used: {why}" for key, why in ignored.items() if key in entry]
    return problems, warnings
