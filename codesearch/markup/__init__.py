"""Text for people as safe HTML, and the URLs it links to: below both the HTTP API and the web UI.

A model's answer is shown by the chat page (`codesearch.web.pages_chat`) and sent, rendered, in the
JSON stream of ``POST /api/chat`` (``answerHtml``, `codesearch.service.routes.chat`): both render it
here, the same way.

- `markdown.py`: Markdown of model answers, with nothing in it that can run or call out;
- `code_refs.py`: an answer with its code references (``repo/path:line``) linked to the file page,
  for one viewer (`answer_html`);
- `urls.py`: the URLs of this service's code pages (`browse_url`).
"""
