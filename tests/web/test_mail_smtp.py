"""Sending mail (codesearch.mail): the SMTP settings of the environment, and mails received by a
real SMTP server on 127.0.0.1 (aiosmtpd, `tests.smtpserver`)."""

from __future__ import annotations

import pytest

from codesearch.errors import InvalidEnvironmentVariable
from codesearch.mail import MailError, code_mail, mailer_from_env
from codesearch.mail.smtp import parse_smtp_url, server_from_env
from tests.smtpserver import free_port, smtp_server

FROM = "codesearch@example.com"
pytestmark = pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS")


@pytest.mark.parametrize("url, host, port, tls, user, password", [
    ("smtp://mail.example.com", "mail.example.com", 25, False, "", ""),
    ("smtp://mail.example.com:2525", "mail.example.com", 2525, False, "", ""),
    ("smtps://mail.example.com", "mail.example.com", 465, True, "", ""),
    ("smtps://bot%40example.com:p%40ss@mail.example.com:4650", "mail.example.com", 4650, True, "bot@example.com", "p@ss"),
])
def test_smtp_urls(url, host, port, tls, user, password):
    s = parse_smtp_url(url)
    assert (s.host, s.port, s.implicit_tls, s.username, s.password) == (host, port, tls, user, password)
    assert password == "" or password not in s.describe()


@pytest.mark.parametrize("url, says", [
    ("http://user:hunter2@mail.example.com", "use smtp://host:port or smtps://host:port"),
    ("smtp://user:hunter2@mail.example.com:notaport", "the port is not a number"),
    ("smtp://user:hunter2@", "the URL names no host"),
])
def test_bad_smtp_urls_say_why_without_the_password(url, says):
    with pytest.raises(InvalidEnvironmentVariable) as e:
        parse_smtp_url(url)
    assert says in str(e.value) and "SMTP_CONNECTION_URL" in str(e.value)
    assert "hunter2" not in str(e.value)


@pytest.mark.parametrize("env, configured", [
    ({}, False),
    ({"SMTP_CONNECTION_URL": "smtp://127.0.0.1:25"}, False),  # no sender
    ({"EMAIL_FROM_ADDRESS": FROM}, False),  # no server
    ({"SMTP_CONNECTION_URL": "smtp://127.0.0.1:25", "EMAIL_FROM_ADDRESS": FROM}, True),
    ({"SMTP_HOST": "127.0.0.1", "SMTP_PORT": "465", "EMAIL_FROM_ADDRESS": FROM}, True),
])
def test_mail_is_configured_by_server_and_sender(env, configured):
    assert (mailer_from_env(env) is not None) == configured


def test_smtp_host_variables():
    s = server_from_env({"SMTP_HOST": "mail.example.com", "SMTP_PORT": "465", "SMTP_USERNAME": "bot",
                         "SMTP_PASSWORD": "pw"})
    assert (s.host, s.port, s.implicit_tls, s.username, s.password) == ("mail.example.com", 465, True, "bot", "pw")
    with pytest.raises(InvalidEnvironmentVariable):
        server_from_env({"SMTP_HOST": "mail.example.com", "SMTP_PORT": "x"})
    with pytest.raises(InvalidEnvironmentVariable):
        mailer_from_env({"SMTP_HOST": "mail.example.com", "EMAIL_FROM_ADDRESS": "not an address"})


def test_a_mail_arrives_with_login():
    statuses = []
    with smtp_server("bot", "s3cret-pw") as inbox:
        mailer = mailer_from_env({"SMTP_CONNECTION_URL": inbox.url("bot", "s3cret-pw"), "EMAIL_FROM_ADDRESS": FROM},
                                 record_status=statuses.append)
        mailer.send(code_mail("Alice@Example.com", "123456", 10, "https://cs.example.com"))
        [mail] = inbox.wait_for("alice@example.com")
    assert inbox.logins == [("bot", True)]
    assert mail["From"] == FROM and mail["Subject"] == "Your codesearch sign-in code: 123456"
    assert "123456" in mail.get_content() and "10 minutes" in mail.get_content()
    assert statuses[-1]["ok"] is True and statuses[-1]["kind"] == "code"


def test_a_wrong_login_is_an_error_without_the_password():
    statuses = []
    with smtp_server("bot", "right-pw") as inbox:
        mailer = mailer_from_env({"SMTP_CONNECTION_URL": inbox.url("bot", "wrong-pw-xyz"), "EMAIL_FROM_ADDRESS": FROM},
                                 record_status=statuses.append)
        with pytest.raises(MailError) as e:
            mailer.send(code_mail("a@example.com", "123456", 10, ""))
        assert inbox.mails == []
    assert "wrong-pw-xyz" not in str(e.value) and "SMTPAuthenticationError" in str(e.value)
    assert statuses[-1]["ok"] is False and "wrong-pw-xyz" not in statuses[-1]["error"]


def test_no_server_fails_fast_and_send_later_never_raises():
    port = free_port()  # nobody listens there
    statuses = []
    mailer = mailer_from_env({"SMTP_CONNECTION_URL": f"smtp://u:pw-123@127.0.0.1:{port}", "EMAIL_FROM_ADDRESS": FROM},
                             record_status=statuses.append)
    with pytest.raises(MailError) as e:
        mailer.send(code_mail("a@example.com", "123456", 10, ""))
    assert f"127.0.0.1:{port}" in str(e.value) and "pw-123" not in str(e.value)
    mailer.send_later(code_mail("a@example.com", "123456", 10, ""))  # logged and recorded, not raised
    mailer._pool.shutdown(wait=True)
    assert len(statuses) == 2 and not statuses[-1]["ok"]
