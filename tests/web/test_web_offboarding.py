"""Offboarding and service accounts in the web UI (codesearch.web.pages_offboarding), in a real
headless Chromium against the Serve app (`tests.webworld`), each new page audited with axe.

An owner deactivates a member (their open browser session ends at once, their key stops working,
they cannot sign in) and reactivates them; removes a member through the confirmation page;
creates a service account and a key for it (the key works, the account cannot sign in); a member
leaves by themselves; the last owner can neither leave nor be removed. Every step is audited.
"""

from __future__ import annotations

import time

import httpx
import pytest
from playwright.sync_api import expect

from codesearch.accounts import hash_password
from tests.a11y import audit, describe
from tests.audited import audited
from tests.webworld import browser, login, page_for, web  # noqa: F401  (pytest fixtures)


def _person(web, email: str) -> dict:
    store = web["store"]
    user = store.create_user(email, email.split("@")[0].title(), password_hash=hash_password("their-pass-1"))
    return {"email": email, "password": "their-pass-1", "id": user.id}


def _repos(web, key: str) -> int:
    return httpx.get(web["url"] + "/api/repos", headers={"Authorization": f"Bearer {key}"}, timeout=30).status_code


def _no_violations(page) -> None:
    problems = audit(page)
    assert not problems, describe(problems)


def test_deactivating_ends_an_open_session_and_reactivating_lets_them_back(page_for, web):
    person = _person(web, "deactivated@example.com")
    key = web["store"].create_api_key(person["id"], "laptop")[1]
    theirs = page_for(person)
    owner = page_for(web["owner"])
    owner.goto(web["url"] + "/settings/users")
    row = owner.locator(f"tr[data-user-id='{person['id']}']")
    row.get_by_role("button", name="Deactivate").click()
    owner.wait_for_selector("p.notice")
    assert "deactivated" in owner.locator("p.notice").inner_text()
    assert row.locator(".badge.revoked").inner_text() == "deactivated"
    _no_violations(owner)
    # their open page is signed out at once, their key refused, and they cannot sign in again
    theirs.goto(web["url"] + "/settings/keys")
    assert "/login" in theirs.url
    assert _repos(web, key) == 401
    theirs.fill("input[name=email]", person["email"])
    theirs.fill("input[name=password]", person["password"])
    with theirs.expect_response(lambda r: r.request.method == "POST") as answer:
        theirs.click("button[type=submit]")
    assert answer.value.status == 403
    expect(theirs.locator("body")).to_contain_text("deactivated")  # once the refusal's page is in
    assert audited(web["store"], "member.deactivate", person["email"])

    row.get_by_role("button", name="Reactivate").click()
    owner.wait_for_selector("p.notice")
    assert "reactivated" in owner.locator("p.notice").inner_text()
    login(theirs, web, person)
    assert "/login" not in theirs.url
    assert _repos(web, key) == 401  # old keys stay revoked: reactivation gives no credential back
    assert audited(web["store"], "member.reactivate", person["email"])


def test_removing_through_the_confirmation_page(page_for, web):
    person = _person(web, "removed@example.com")
    key = web["store"].create_api_key(person["id"], "ci")[1]
    theirs = page_for(person)
    owner = page_for(web["owner"])
    owner.goto(web["url"] + f"/settings/users/{person['id']}/remove")
    assert "1 active API key" in owner.content()
    _no_violations(owner)
    owner.get_by_role("button", name=f"Remove {person['email']}").click()
    owner.wait_for_selector("p.notice")
    assert "removed" in owner.locator("p.notice").inner_text()
    assert owner.locator(f"tr[data-user-id='{person['id']}']").count() == 0
    assert _repos(web, key) == 401
    theirs.goto(web["url"] + "/settings/keys")
    assert "/login" in theirs.url
    assert web["store"].find_user_by_email(person["email"]) is None
    assert audited(web["store"], "member.remove", person["email"])


def test_a_service_account_owns_keys_and_never_signs_in(page_for, web):
    owner = page_for(web["owner"])
    owner.goto(web["url"] + "/settings/service-accounts")
    _no_violations(owner)
    owner.fill("#sa-name", "Nightly CI")
    owner.get_by_role("button", name="Create service account").click()
    section = owner.locator("section.service-account", has_text="Nightly CI")
    section.get_by_label("New key").fill("build")
    section.get_by_role("button", name="Create key").click()
    key = owner.locator("#new-key").input_value()
    assert key.startswith("cs_")
    _no_violations(owner)
    assert _repos(web, key) == 200
    account = next(u for u in web["store"].list_service_accounts() if u.name == "Nightly CI")
    assert account.email.endswith(".invalid") and account.password_hash is None
    assert audited(web["store"], "service_account.create", "Nightly CI")
    # it cannot sign in: no password, and the store refuses it a session whatever the route
    with pytest.raises(Exception, match="service account"):
        web["store"].create_web_session(account.id, ttl_seconds=60)
    # revoking its key from the page
    owner.locator("section.service-account", has_text="Nightly CI").get_by_role("button", name="Revoke").click()
    owner.wait_for_selector("p.notice")
    assert _repos(web, key) == 401


def test_a_member_leaves_and_the_last_owner_cannot(page_for, web):
    person = _person(web, "leaver@example.com")
    theirs = page_for(person)
    theirs.goto(web["url"] + "/settings/leave")
    _no_violations(theirs)
    theirs.get_by_role("button", name="Leave and delete my account").click()
    theirs.wait_for_url(lambda url: "/login" in url)
    assert web["store"].find_user_by_email(person["email"]) is None
    assert audited(web["store"], "member.leave", person["email"])

    owner = page_for(web["owner"])
    owner.goto(web["url"] + "/settings/leave")
    with owner.expect_response(lambda r: r.request.method == "POST") as answer:
        owner.get_by_role("button", name="Leave and delete my account").click()
    assert answer.value.status == 403
    # the refusal's page may still be replacing the form when the response has arrived
    expect(owner.locator("body")).to_contain_text("last owner")
    owner.goto(web["url"] + f"/settings/users/{web['owner']['id']}/remove")
    with owner.expect_response(lambda r: r.request.method == "POST") as answer:
        owner.get_by_role("button", name=f"Remove {web['owner']['email']}").click()
    assert answer.value.status == 403
    assert web["store"].get_user(web["owner"]["id"]).role == "OWNER"


def _oauth_token(store, user_id: int) -> str:
    client, _ = store.create_oauth_client("test client", ["http://127.0.0.1:1/cb"], {}, with_secret=False)
    code = store.create_oauth_code(client_id=client.id, user_id=user_id, redirect_uri="http://127.0.0.1:1/cb",
                                   code_challenge="x", scope="mcp", resource=None, ttl_seconds=60)
    return store.redeem_oauth_code(code, client_id=client.id, check=lambda _c: None, access_ttl=600,
                                   refresh_ttl=None).tokens.access_token


def test_removal_ends_every_credential_on_two_serve_replicas_within_5_s(web):
    """A second Serve application over the world's data directory: another replica process with
    its own store. A removal through one is refused by both within 5 s."""
    from ray import serve

    from codesearch.serving.deployment import search_application
    from tests.webworld import PREFIX

    serve.run(search_application(PREFIX, len(web["pool"].actors), anonymous_access=False, data_dir=web["data"]),
              name="web-test-b", route_prefix="/web-b")
    try:
        replicas = [web["url"], web["serve_url"] + "/web-b"]
        store = web["store"]
        person = _person(web, "two-replicas@example.com")
        key = store.create_api_key(person["id"], "laptop")[1]
        cookie = store.create_web_session(person["id"], ttl_seconds=600)[0]
        oauth = _oauth_token(store, person["id"])
        scoped = httpx.post(replicas[1] + "/api/ee/scoped_access_token", json={"repoIds": [1]}, timeout=30,
                            headers={"Authorization": f"Bearer {key}"}).json()["token"]
        mcp_init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
        probes = {
            "API key": lambda u: httpx.get(u + "/api/repos", headers={"Authorization": f"Bearer {key}"}, timeout=30),
            "web session": lambda u: httpx.get(u + "/api/repos", cookies={"codesearch_session": cookie}, timeout=30),
            "OAuth access token": lambda u: httpx.post(u + "/api/mcp", json=mcp_init, timeout=30, headers={
                "Authorization": f"Bearer {oauth}", "Accept": "application/json, text/event-stream"}),
            "scoped access token": lambda u: httpx.get(u + "/api/repos", timeout=30,
                                                       headers={"Authorization": f"Bearer {scoped}"}),
        }
        for u in replicas:
            for kind, probe in probes.items():
                assert probe(u).status_code == 200, (kind, u)
        owner_key = store.create_api_key(web["owner"]["id"], "offboarding")[1]
        started = time.monotonic()
        gone = httpx.delete(replicas[0] + "/api/ee/user", params={"userId": str(person["id"])}, timeout=30,
                            headers={"Authorization": f"Bearer {owner_key}"})
        assert gone.status_code == 200, gone.text
        alive = {(kind, u) for kind in probes for u in replicas}
        while alive and time.monotonic() - started < 5.0:
            alive = {(kind, u) for kind, u in alive if probes[kind](u).status_code != 401}
        assert not alive, f"still accepted 5 s after the removal: {sorted(alive)}"
    finally:
        serve.delete("web-test-b")
