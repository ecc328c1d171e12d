"""Language models for `ask_codebase`: a provider-neutral chat client and the agent loop.

    from codesearch.llm import ModelClient, ModelSpec, run_agent
    spec = ModelSpec.from_config(store.list_language_models()[0])   # the first model is the default
    with ModelClient(spec) as client:
        result = run_agent(question, client, toolset, repos=["github.com/acme/api"])

`codesearch.llm.spec`: `ModelSpec`, `Reply`, `ToolCall`, `ModelError`. `codesearch.llm.client`:
`ModelClient` (every provider of the config schema over httpx). `codesearch.config.model_providers`: which
provider speaks which dialect and what each config field does. `codesearch.llm.dialects`: the
wire formats. `codesearch.llm.agent`: `ToolSet`, `run_agent`, `AgentResult`.
"""

from codesearch.config.model_providers import SUPPORTED_PROVIDERS
from codesearch.errors import ModelError
from codesearch.llm.agent import SYSTEM_PROMPT, AgentResult, ToolSet, run_agent, system_prompt
from codesearch.llm.client import ModelClient
from codesearch.llm.spec import ModelSpec, Reply, ToolCall

__all__ = [
    "SUPPORTED_PROVIDERS",
    "SYSTEM_PROMPT",
    "AgentResult",
    "ModelClient",
    "ModelError",
    "ModelSpec",
    "Reply",
    "ToolCall",
    "ToolSet",
    "run_agent",
    "system_prompt",
]
