"""Language models for `ask_codebase`: a provider-neutral chat client and the agent loop.

    from codesearch.llm import ModelClient, ModelSpec, run_agent
    spec = ModelSpec.from_config(store.list_language_models()[0])   # the first model is the default
    with ModelClient(spec) as client:
        result = run_agent(question, client, toolset, repos=["github.com/acme/api"])

`codesearch.llm.client`: `ModelSpec`, `ModelClient` (OpenAI Chat Completions and Anthropic
Messages over httpx), `Reply`, `ToolCall`, `ModelError`. `codesearch.llm.agent`: `ToolSet`,
`run_agent`, `AgentResult`.
"""

from codesearch.llm.agent import SYSTEM_PROMPT, AgentResult, ToolSet, run_agent, system_prompt
from codesearch.llm.client import SUPPORTED_PROVIDERS, ModelClient, ModelError, ModelSpec, Reply, ToolCall

__all__ = [
    "SUPPORTED_PROVIDERS", "SYSTEM_PROMPT", "AgentResult", "ModelClient", "ModelError", "ModelSpec", "Reply",
    "ToolCall", "ToolSet", "run_agent", "system_prompt",
]
