"""Sending e-mail through the SMTP server the environment names.

The environment (Sourcebot's names):

* ``SMTP_CONNECTION_URL``: ``smtp://[user:password@]host[:port]`` (port 25 by default; STARTTLS
  when the server offers it) or ``smtps://…`` (TLS from the first byte, port 465 by default).
  User and password are URL-encoded (``%40`` for ``@``);
* else ``SMTP_HOST`` with ``SMTP_PORT`` (default 25; 465 means smtps), ``SMTP_USERNAME`` and
  ``SMTP_PASSWORD``;
* ``EMAIL_FROM_ADDRESS``: the sender of every mail.

Without a server and a sender the service sends nothing (`mailer_from_env` is None): e-mail code
sign-in is off, and invites are links the owner passes on.

Every conversation with the server has a bounded timeout (`TIMEOUT_S`). `Mailer.send` is for a
person who waits for the answer (an owner sending an invite or a test mail): it raises `MailError`.
`Mailer.send_later` is for the sign-in pages: a worker thread sends, so the page answers at once
(and as fast whether or not a mail goes out: a visitor learns nothing from the time it takes).
The outcome of every attempt is stored as the service setting ``mailStatus`` (`MAIL_STATUS_KEY`),
which the owners' security page shows; failures are logged. No message, log line or error ever
carries the SMTP password (`MailError` texts are cleaned of it).
"""

from __future__ import annotations

import logging
import smtplib
import ssl
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from email.message import EmailMessage
from email.utils import formataddr, make_msgid, parseaddr
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from codesearch.errors import CodesearchError, InvalidEnvironmentVariable

if TYPE_CHECKING:
    from codesearch.mail.messages import Message

log = logging.getLogger(__name__)

SMTP_URL_ENV = "SMTP_CONNECTION_URL"
FROM_ENV = "EMAIL_FROM_ADDRESS"
#: seconds for connecting and for each reply of the server
TIMEOUT_S = 10.0
#: mails waiting for the worker threads at most; more are dropped (and logged)
QUEUE_LIMIT = 200
#: the service setting holding the outcome of the last attempt
MAIL_STATUS_KEY = "mailStatus"


class MailError(CodesearchError):
    """A mail could not be sent (the message says why, never with the SMTP password)."""


@dataclass(frozen=True)
class SmtpServer:
    """Where mail goes: host, port, TLS from the start (smtps) or STARTTLS when offered, login."""

    host: str
    port: int
    implicit_tls: bool = False
    username: str = ""
    password: str = ""

    def describe(self) -> str:
        """``smtps://user@host:port`` (never the password)."""
        scheme = "smtps" if self.implicit_tls else "smtp"
        who = f"{self.username}@" if self.username else ""
        return f"{scheme}://{who}{self.host}:{self.port}"


def _redacted_url(raw: str) -> str:
    try:
        parts = urlsplit(raw)
    except ValueError:
        return "(unparsable)"
    if parts.password:
        return raw.replace(parts.password, "***")
    return raw


def parse_smtp_url(raw: str) -> SmtpServer:
    """`SmtpServer` of an ``smtp://`` or ``smtps://`` URL; `InvalidEnvironmentVariable` (without the
    password) when it is not one."""
    shown = _redacted_url(raw)
    try:
        parts = urlsplit(raw)
        port = parts.port
    except ValueError:
        raise InvalidEnvironmentVariable(SMTP_URL_ENV, shown, "the port is not a number") from None
    if parts.scheme not in ("smtp", "smtps"):
        raise InvalidEnvironmentVariable(SMTP_URL_ENV, shown, "use smtp://host:port or smtps://host:port") from None
    if not parts.hostname:
        raise InvalidEnvironmentVariable(SMTP_URL_ENV, shown, "the URL names no host")
    tls = parts.scheme == "smtps"
    return SmtpServer(
        host=parts.hostname,
        port=port or (465 if tls else 25),
        implicit_tls=tls,
        username=unquote(parts.username or ""),
        password=unquote(parts.password or ""),
    )


def server_from_env(environ: Mapping[str, str]) -> SmtpServer | None:
    """The SMTP server the environment names (see the module docstring), or None."""
    url = (environ.get(SMTP_URL_ENV) or "").strip()
    if url:
        return parse_smtp_url(url)
    host = (environ.get("SMTP_HOST") or "").strip()
    if not host:
        return None
    raw_port = (environ.get("SMTP_PORT") or "").strip() or "25"
    if not raw_port.isdigit() or not 0 < int(raw_port) < 65536:
        raise InvalidEnvironmentVariable("SMTP_PORT", raw_port, "a port number (1-65535)")
    port = int(raw_port)
    return SmtpServer(
        host=host,
        port=port,
        implicit_tls=port == 465,
        username=(environ.get("SMTP_USERNAME") or "").strip(),
        password=environ.get("SMTP_PASSWORD") or "",
    )


def _sender(environ: Mapping[str, str]) -> str:
    raw = (environ.get(FROM_ENV) or "").strip()
    _name, address = parseaddr(raw)
    if raw and ("@" not in address or any(c in raw for c in "\r\n")):
        raise InvalidEnvironmentVariable(FROM_ENV, raw, "an e-mail address (e.g. codesearch@example.com)")
    return raw


class Mailer:
    """Sends `Message`s through one `SmtpServer` from one sender (see the module docstring).
    `record_status` stores the outcome of each attempt for the owners (a callable, so that this
    module needs no store)."""

    def __init__(
        self,
        server: SmtpServer,
        sender: str,
        *,
        timeout_s: float = TIMEOUT_S,
        record_status: Callable[[dict[str, Any]], None] | None = None,
    ):
        self.server = server
        self.sender = sender
        self.timeout_s = timeout_s
        self.record_status = record_status
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._queued = 0

    def _connect(self) -> smtplib.SMTP:
        s = self.server
        if s.implicit_tls:
            return smtplib.SMTP_SSL(s.host, s.port, timeout=self.timeout_s, context=ssl.create_default_context())
        conn = smtplib.SMTP(s.host, s.port, timeout=self.timeout_s)
        conn.ehlo()
        if conn.has_extn("starttls"):
            conn.starttls(context=ssl.create_default_context())
            conn.ehlo()
        return conn

    def _clean(self, text: str) -> str:
        password = self.server.password
        return text.replace(password, "***") if password else text

    def compose(self, message: Message) -> EmailMessage:
        mail = EmailMessage()
        mail["From"] = self.sender
        mail["To"] = formataddr(("", message.to))
        mail["Subject"] = message.subject
        mail["Message-ID"] = make_msgid(domain=self.server.host)
        mail["Auto-Submitted"] = "auto-generated"
        mail.set_content(message.text)
        return mail

    def send(self, message: Message) -> None:
        """Send now; `MailError` when the server cannot be reached or refuses."""
        try:
            with self._connect() as conn:
                if self.server.username:
                    conn.login(self.server.username, self.server.password)
                refused = conn.send_message(self.compose(message))
            if refused:
                raise MailError(f"the server refused the recipient {message.to}")
        except MailError as e:
            self._status(False, message, str(e))
            raise
        except (OSError, smtplib.SMTPException) as e:
            text = self._clean(f"{type(e).__name__}: {e}")[:500]
            self._status(False, message, text)
            raise MailError(f"could not send mail through {self.server.describe()}: {text}") from None
        self._status(True, message, "")

    def send_later(self, message: Message) -> None:
        """Send on a worker thread; a failure is logged and stored for the owners, never raised."""
        with self._lock:
            if self._queued >= QUEUE_LIMIT:
                log.warning("mail queue full: dropped a %s mail", message.kind)
                return
            self._queued += 1
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="mail")
            pool = self._pool
        pool.submit(self._send_quietly, message)

    def _send_quietly(self, message: Message) -> None:
        try:
            self.send(message)
        except MailError as e:
            log.warning("could not send a %s mail: %s", message.kind, e)
        except Exception:  # noqa: BLE001 - a worker thread: log, never die silently
            log.exception("could not send a %s mail", message.kind)
        finally:
            with self._lock:
                self._queued -= 1

    def _status(self, ok: bool, message: Message, error: str) -> None:
        if self.record_status is None:
            return
        status = {"ok": ok, "at": datetime.now(UTC).isoformat(timespec="seconds"), "kind": message.kind}
        if error:
            status["error"] = self._clean(error)
        try:
            self.record_status(status)
        except Exception:  # noqa: BLE001 - the mail's outcome matters more than its record
            log.warning("could not store the mail status", exc_info=True)


def mailer_from_env(
    environ: Mapping[str, str], record_status: Callable[[dict[str, Any]], None] | None = None
) -> Mailer | None:
    """The `Mailer` the environment configures, or None without a server or a sender."""
    server = server_from_env(environ)
    sender = _sender(environ)
    if server is None or not sender:
        return None
    return Mailer(server, sender, record_status=record_status)
