"""The sign-in page's options are read from one copy of the security settings: the settings are
re-read every few seconds, and a page built from several reads showed, after a change, the new
e-mail code form with the old sign-in message (test_web_email_signin saw it under load)."""

from __future__ import annotations

from types import SimpleNamespace

from codesearch.web.security_settings import Security
from codesearch.web.signin_options import login_context

OLD = Security(password_login=True, email_code_login=False, self_signup=False, signin_message="")
NEW = Security(password_login=True, email_code_login=True, self_signup=True, signin_message="Use your work address.")


class ChangesOnEveryRead:
    """Settings that change between any two reads: the worst timing of a re-read."""

    def __init__(self):
        self.reads = 0

    def current(self) -> Security:
        self.reads += 1
        return OLD if self.reads == 1 else NEW


def test_one_page_shows_one_version_of_the_settings():
    web = SimpleNamespace(security=ChangesOnEveryRead(), identity_providers={}, iap=None, mailer=object(), public_url="")
    store = SimpleNamespace(has_users=lambda: True)
    ctx = login_context(web, store)
    assert web.security.reads == 1
    assert (ctx["email_code"], ctx["self_signup"], ctx["signin_message"]) == (False, False, "")
