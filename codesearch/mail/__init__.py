"""Outgoing e-mail: the SMTP server of the environment (`smtp`) and the messages the service sends
(`messages`: sign-in codes, invites, join requests and their approval).

Nothing here knows HTTP: the pages (`codesearch.web`) compose a message and hand it to the `Mailer`.
"""

from __future__ import annotations

from codesearch.mail.messages import Message, approved_mail, code_mail, invite_mail, join_request_mail, test_mail
from codesearch.mail.smtp import MAIL_STATUS_KEY, Mailer, MailError, SmtpServer, mailer_from_env

__all__ = [
    "MAIL_STATUS_KEY",
    "MailError",
    "Mailer",
    "Message",
    "SmtpServer",
    "approved_mail",
    "code_mail",
    "invite_mail",
    "join_request_mail",
    "mailer_from_env",
    "test_mail",
]
