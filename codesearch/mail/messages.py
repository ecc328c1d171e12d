"""The mails the service sends, as plain text: what each says and to whom.

Plain text only: nothing a mail client could run or load, and every link is the service's public
URL (``SOURCEBOT_PUBLIC_URL`` / the configured public URL) followed by a path of ours.
"""

from __future__ import annotations

from dataclasses import dataclass

#: the product's name in subjects
NAME = "codesearch"


@dataclass(frozen=True)
class Message:
    """One mail: recipient, subject, text; `kind` names it in logs and in the mail status."""

    kind: str
    to: str
    subject: str
    text: str


def code_mail(to: str, code: str, minutes: int, public_url: str) -> Message:
    """The sign-in code for `to` (it works once, for `minutes`)."""
    where = f" at {public_url}" if public_url else ""
    return Message(
        "code",
        to,
        f"Your {NAME} sign-in code: {code}",
        f"Your code to sign in to {NAME}{where} is:\n\n    {code}\n\n"
        f"It works once, for {minutes} minutes. If you did not ask for it, ignore this mail: "
        "nobody can sign in without the code.\n",
    )


def invite_mail(to: str, inviter: str, role: str, link: str, expires: str) -> Message:
    """An invite to join, with its link (the only copy besides the one the owner saw)."""
    return Message(
        "invite",
        to,
        f"{inviter} invited you to {NAME}",
        f"{inviter} invited you to join {NAME} as {role.lower()}.\n\nOpen this link to join:\n\n    {link}\n\n"
        f"The link works once, until {expires}.\n",
    )


def join_request_mail(to: str, requester: str, members_url: str) -> Message:
    """To an owner: someone signed up and waits for approval."""
    return Message(
        "join-request",
        to,
        f"{requester} asks to join {NAME}",
        f"{requester} created an account and waits for an owner's approval.\n\n"
        f"Approve or decline the request here:\n\n    {members_url}\n",
    )


def approved_mail(to: str, login_url: str) -> Message:
    """To a user whose request an owner approved."""
    return Message(
        "approved",
        to,
        f"You can sign in to {NAME} now",
        f"An owner approved your account. Sign in here:\n\n    {login_url}\n",
    )


def test_mail(to: str) -> Message:
    """What an owner sends to check the SMTP settings."""
    return Message(
        "test",
        to,
        f"{NAME}: test mail",
        f"This mail shows that {NAME} can send mail through the configured SMTP server.\n",
    )
