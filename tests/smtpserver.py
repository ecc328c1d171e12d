"""A real SMTP server on 127.0.0.1 (aiosmtpd), keeping the mails it receives, for tests of the
mail the service sends."""

from __future__ import annotations

import contextlib
import email
import email.policy
import re
import time
from dataclasses import dataclass, field
from typing import Iterator

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

from tests.ports import free_port  # noqa: F401  (the mail tests import it from here)


@dataclass
class Inbox:
    """What the server received: parsed mails (`email.message.EmailMessage`), oldest first."""

    host: str = "127.0.0.1"
    port: int = 0
    mails: list = field(default_factory=list)
    logins: list = field(default_factory=list)

    async def handle_DATA(self, server, session, envelope):  # aiosmtpd's handler hook
        msg = email.message_from_bytes(envelope.content, policy=email.policy.default)
        msg["X-Envelope-To"] = ", ".join(envelope.rcpt_tos)
        self.mails.append(msg)
        return "250 OK"

    def url(self, user: str = "", password: str = "") -> str:
        who = f"{user}:{password}@" if user else ""
        return f"smtp://{who}{self.host}:{self.port}"

    def to(self, address: str) -> list:
        return [m for m in self.mails if address.lower() in m["X-Envelope-To"].lower()]

    def wait_for(self, address: str, count: int = 1, timeout: float = 10.0) -> list:
        """The mails to `address`, once there are `count` of them (polls; bounded)."""
        deadline = time.monotonic() + timeout
        while len(self.to(address)) < count:
            assert time.monotonic() < deadline, f"no mail to {address} within {timeout} s: {[m['To'] for m in self.mails]}"
            time.sleep(0.02)
        return self.to(address)

    def code_for(self, address: str, count: int = 1) -> str:
        """The sign-in code in the newest mail to `address`."""
        body = self.wait_for(address, count)[-1].get_content()
        found = re.search(r"\b(\d{6})\b", body)
        assert found, body
        return found.group(1)


@contextlib.contextmanager
def smtp_server(user: str = "", password: str = "") -> Iterator[Inbox]:
    """An SMTP server on a free port of 127.0.0.1; with `user`, it requires that login (AUTH over
    plain text: the test server has no TLS)."""
    inbox = Inbox(port=free_port())
    kwargs = {}
    if user:
        def check(server, session, envelope, mechanism, auth_data):
            if not isinstance(auth_data, LoginPassword):
                return AuthResult(success=False, handled=False)
            ok = (auth_data.login.decode(), auth_data.password.decode()) == (user, password)
            inbox.logins.append((auth_data.login.decode(), ok))
            return AuthResult(success=ok, handled=False)

        kwargs = {"authenticator": check, "auth_require_tls": False, "auth_required": True}
    controller = Controller(inbox, hostname="127.0.0.1", port=inbox.port, **kwargs)
    controller.start()
    try:
        yield inbox
    finally:
        controller.stop()
