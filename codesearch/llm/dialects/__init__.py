"""The wire formats of the model providers: each module turns the provider-neutral conversation
(`codesearch.llm.spec`) into one provider's request body and its response into a `Reply`.

    body = chat_completions.body(spec, messages, tools, tool_choice)
    reply = chat_completions.reply(spec, response_json, new_id)

URLs, credentials, retries and errors are the client's (`codesearch.llm.client`); a dialect
only knows the JSON. `new_id()` gives a fresh tool call id for APIs whose calls carry none.
"""


def add_turn(turns: list[dict], role: str, blocks: list[dict], key: str = "content") -> None:
    """Append `blocks` to the conversation as a turn of `role`, merged into the last turn when it
    has the same role: the APIs that alternate user and assistant turns (Anthropic, Bedrock,
    Gemini) want tool results and the next user text in one turn. `key` names the list of blocks
    in a turn (``content``, or Gemini's ``parts``)."""
    if turns and turns[-1]["role"] == role:
        turns[-1][key].extend(blocks)
    else:
        turns.append({"role": role, key: blocks})
