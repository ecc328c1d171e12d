"""Jinja2 for the pages: autoescaped, one `render` that gives every template the same context.

Every template extends ``base.html`` and receives:
- `identity` (`codesearch.permissions.Identity`), `user` (the `User` or None), `is_owner`;
- `csrf_token` (put it in every form as ``<input type=hidden name=csrf_token>``; the page's
  JavaScript sends it as ``X-CSRF-Token`` on API calls that change something);
- `anonymous_access` (whether visitors without an account may search);
- `root`: the path the app is mounted under (Serve's route prefix, e.g. ``/cs``; usually ""): every
  link and form action is written ``{{ root }}/path``, and JavaScript reads it from
  ``document.body.dataset.root``;
- `title` and whatever the page passes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from fastapi import Request
from fastapi.responses import HTMLResponse
from jinja2 import Environment, FileSystemLoader, select_autoescape

from codesearch.web import TEMPLATES_DIR

_env = Environment(loader=FileSystemLoader(TEMPLATES_DIR), autoescape=select_autoescape(["html"]),
                   trim_blocks=True, lstrip_blocks=True)


@dataclass
class WebContext:
    """What the page routers share: the app's state and helpers (built by `api.build_app`)."""

    get_store: Callable[[], Any]
    authenticator: Any  # codesearch.service.auth.Authenticator
    make_context: Callable[[Any], Any]  # Identity -> codesearch.tools.context.ToolContext
    public_url: str
    anonymous_access: bool
    extra: dict = field(default_factory=dict)


def render(request: Request, template: str, status_code: int = 200, **context) -> HTMLResponse:
    """`template` rendered with the common context (see the module docstring)."""
    identity = getattr(request.state, "identity", None)
    user = getattr(identity, "user", None)
    base = {
        "request": request,
        "identity": identity,
        "user": user,
        "is_owner": getattr(user, "role", None) == "OWNER",
        "csrf_token": getattr(request.state, "csrf_token", ""),
        "anonymous_access": getattr(request.state, "anonymous_access", False),
        "title": "codesearch",
        "root": request.scope.get("root_path", "").rstrip("/"),
    }
    base.update(context)
    return HTMLResponse(_env.get_template(template).render(**base), status_code=status_code,
                        headers={"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff",
                                 "Referrer-Policy": "same-origin"})
