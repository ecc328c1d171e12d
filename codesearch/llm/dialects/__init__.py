"""The wire formats of the model providers: each module turns the provider-neutral conversation
(`codesearch.llm.spec`) into one provider's request body and its response into a `Reply`.

    body = chat_completions.body(spec, messages, tools, tool_choice)
    reply = chat_completions.reply(spec, response_json, new_id)

URLs, credentials, retries and errors are the client's (`codesearch.llm.client`); a dialect
only knows the JSON. `new_id()` gives a fresh tool call id for APIs whose calls carry none.
"""
