"""Joining with an invite under the owners' sign-in switches (codesearch.web.pages_sso `/invite/<token>`,
codesearch.web.pages_email_code, codesearch.web.security_settings).

An invite page offers the ways to join that are switched on: a button per single sign-on provider that
is on (the invite rides along in the flow), a code sent by e-mail (the invite rides along with the
code), and the password form only while password sign-in is on. With passwords off (by the owners on the
security page, or forced by ``AUTH_CREDENTIALS_LOGIN_ENABLED=false``) a POST that tries a password anyway
is refused with 403 and the same words as ``/login``'s refusal, and the invite stays unused.

Two apps (`build_app`, like two replicas) over one data directory are served on 127.0.0.1: "a" as
configured, "f" with ``AUTH_CREDENTIALS_LOGIN_ENABLED=false``; mail goes to a real SMTP server on
127.0.0.1 (`tests.smtpserver`). The identity providers are configured but never contacted: only their
buttons are looked at here (their flows are tested in test_sso.py).
"""

from __future__ import annotations

import json
import re
import time

import httpx
import pytest

from codesearch.accounts import hash_password
from codesearch.config import load_config
from codesearch.serving.api import build_app
from codesearch.store import Store
from tests.asgiserver import bound_socket, serving
from tests.audited import audited
from tests.smtpserver import smtp_server

ENV = {"SOURCEBOT_ENCRYPTION_KEY": "invite-methods-test-secret-0123456789", "GH_ID": "id", "GH_SECRET": "secret",
       "GT_ID": "id", "GT_SECRET": "secret"}
OWNER = {"email": "owner@example.com", "password": "owner-pass-1"}
PROVIDERS = [
    {"provider": "github", "purpose": "sso", "clientId": {"env": "GH_ID"}, "clientSecret": {"env": "GH_SECRET"},
     "baseUrl": "http://127.0.0.1:9"},
    {"provider": "gitea", "purpose": "sso", "clientId": {"env": "GT_ID"}, "clientSecret": {"env": "GT_SECRET"},
     "baseUrl": "http://127.0.0.1:9"},
]


class _Searcher:
    def search(self, *a, **k):
        raise AssertionError("no search in these tests")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    data = str(tmp_path_factory.mktemp("invites"))
    with smtp_server() as inbox:
        store = Store.open(data, environ=ENV)
        owner = store.create_first_user(OWNER["email"], "Owner", password_hash=hash_password(OWNER["password"]))
        for pid in ("github", "gitea"):  # so that the owner keeps a way in with passwords and codes off
            store.link_account(owner.id, provider=pid, provider_type=pid, subject=f"owner-{pid}")
        env = dict(ENV, SMTP_CONNECTION_URL=inbox.url(), EMAIL_FROM_ADDRESS="codesearch@example.com")
        config = load_config(json.dumps({"identityProviders": PROVIDERS}), environ=env)
        opened, servers, urls = [], [], {}
        for name, extra in (("a", {}), ("f", {"AUTH_CREDENTIALS_LOGIN_ENABLED": "false"})):
            s = Store.open(data, environ=ENV)
            sock = bound_socket()
            url = f"http://127.0.0.1:{sock.getsockname()[1]}"
            app = build_app(lambda: _Searcher(), get_store=lambda s=s: s, anonymous_access=False, public_url=url,
                            environ=dict(env, **extra), identity_providers=config.identity_providers)
            ctx = serving(app, sock=sock)
            urls[name] = ctx.__enter__()
            opened.append(s)
            servers.append(ctx)
        owner = httpx.Client(base_url=urls["a"], timeout=30, follow_redirects=False)
        r = owner.post("/login", data={"csrf_token": _token(owner.get("/login").text), **OWNER})
        assert r.status_code == 303, r.text
        yield {"store": store, "inbox": inbox, "owner": owner, **urls}
        owner.close()
        for ctx in servers:
            ctx.__exit__(None, None, None)
        for s in opened + [store]:
            s.close()


def _token(html: str) -> str:
    return re.search(r'name="csrf_token" value="([^"]+)"', html).group(1)


def _settings(world, **switches) -> None:
    """Save the security settings on app "a" as the owner: the switches named True are on, the
    providers listed in `providers` are on."""
    owner = world["owner"]
    form: dict = {k: "on" for k, v in switches.items() if v is True}
    form["provider"] = switches.get("providers", [])
    form["csrf_token"] = _token(owner.get("/settings/security").text)
    r = owner.post("/settings/security", data=form)
    assert r.status_code == 303, r.text


def _invite(world, email: str | None = None, role: str = "MEMBER") -> str:
    _invite_, token = world["store"].create_invite(None, email=email, role=role)
    return token


def _visitor(base: str) -> tuple[httpx.Client, str]:
    c = httpx.Client(base_url=base, timeout=30, follow_redirects=False)
    return c, _token(c.get("/login").text)


# ----------------------------------------------------------------------------- what the page offers

PAGE_CASES = [
    # (case, app, switches saved by the owners, password form, code form, SSO buttons, POST with a password)
    ("everything on", "a", {"password_login": True, "email_code_login": True, "providers": ["github", "gitea"]},
     True, True, ["github", "gitea"], 303),
    ("passwords off by the owners", "a", {"email_code_login": True, "providers": ["github"]},
     False, True, ["github"], 403),
    ("passwords forced off by the environment", "f", {"password_login": True, "providers": ["gitea"]},
     False, False, ["gitea"], 403),
    ("only providers", "a", {"providers": ["github", "gitea"]}, False, False, ["github", "gitea"], 403),
]


@pytest.mark.parametrize("case,app,switches,password_form,code_form,buttons,post_status", PAGE_CASES,
                         ids=[c[0] for c in PAGE_CASES])
def test_the_invite_page_offers_the_ways_that_are_on(world, case, app, switches, password_form, code_form, buttons,
                                                     post_status):
    _settings(world, **switches)
    email = f"{case.replace(' ', '-')}@example.com"
    token = _invite(world)
    c, csrf = _visitor(world[app])
    page = c.get(f"/invite/{token}")
    assert page.status_code == 200
    assert ('name="password"' in page.text) is password_form
    assert ('action="/login/code"' in page.text) is code_form
    assert re.findall(r'data-provider="([^"]+)"', page.text) == buttons
    assert ("Joining with a password is turned off" in page.text) is (not password_form)
    r = c.post(f"/invite/{token}", data={"csrf_token": csrf, "email": email, "name": "N",
                                         "password": "a long password", "confirm": "a long password"})
    assert r.status_code == post_status, r.text
    user = world["store"].find_user_by_email(email)
    open_invite = world["store"].find_invite(token)
    if post_status == 303:
        assert user is not None and open_invite is None
        assert audited(world["store"], "invite.accept", email)
    else:  # refused as /login refuses: nothing made, the invite still open for another way
        assert "Joining with a password is turned off on this server" in r.text and 'role="alert"' in r.text
        assert user is None and open_invite is not None
    c.close()


def test_with_every_way_off_the_page_says_to_ask_an_owner(world):
    """The security page refuses to lock its owner out, so the state is stored directly and read by
    a fresh app (app "a" keeps what it read for a few seconds)."""
    token = _invite(world)
    world["store"].put_service_setting("security", {"password_login": False, "disabled_providers": ["github", "gitea"]})
    with serving(build_app(lambda: _Searcher(), get_store=lambda: world["store"], anonymous_access=False,
                           environ=ENV, identity_providers=load_config(json.dumps({"identityProviders": PROVIDERS}),
                                                                       environ=ENV).identity_providers)) as url:
        page = httpx.get(f"{url}/invite/{token}", timeout=30)
    assert page.status_code == 200 and "No other way to join is switched on now: ask an owner" in page.text
    assert 'name="password"' not in page.text and "data-provider" not in page.text
    world["store"].put_service_setting("security", {})


# ----------------------------------------------------------------------------- joining with an e-mail code

CODE_CASES = [
    # (case, invite's e-mail, invite's role, address typed, self sign-up, mailed, verify status, role after)
    ("an invite for anyone", None, "MEMBER", "code-anyone@example.com", False, True, 303, "MEMBER"),
    ("an invite for the address, as owner", "code-owner@example.com", "OWNER", "code-owner@example.com", False,
     True, 303, "OWNER"),
    ("an invite for another address", "code-x@example.com", "MEMBER", "code-y@example.com", False, False, None, None),
    ("another address, self sign-up on", "code-p@example.com", "MEMBER", "code-q@example.com", True, True, 403,
     None),
]


@pytest.mark.parametrize("case,invited,role,typed,self_signup,mailed,status,role_after", CODE_CASES,
                         ids=[c[0] for c in CODE_CASES])
def test_joining_with_a_code_carries_the_invite(world, case, invited, role, typed, self_signup, mailed, status,
                                                 role_after):
    # passwords off, approval required: an invite still lets one in at once, with its role
    _settings(world, email_code_login=True, require_approval=True, self_signup=self_signup, providers=["github"])
    token = _invite(world, email=invited, role=role)
    c, csrf = _visitor(world["a"])
    sent = c.post("/login/code", data={"csrf_token": csrf, "email": typed, "invite": token})
    assert sent.status_code == 200 and f'name="invite" value="{token}"' in sent.text
    if not mailed:
        time.sleep(0.3)  # a mail would be on its way by now (sent on a worker thread)
        assert world["inbox"].to(typed) == [] and world["store"].find_invite(token) is not None
        c.close()
        return
    code = world["inbox"].code_for(typed)
    r = c.post("/login/code/verify", data={"csrf_token": csrf, "email": typed, "code": code, "invite": token})
    assert r.status_code == status, r.text
    user = world["store"].find_user_by_email(typed)
    if status == 303:
        assert user.role == role_after and user.email_verified and not world["store"].is_pending(user.id)
        assert world["store"].find_invite(token) is None
        assert audited(world["store"], "invite.accept", typed)
    else:
        assert "This invite is for another e-mail address" in r.text and user is None
        assert world["store"].find_invite(token) is not None
    c.close()
    _settings(world, password_login=True)
