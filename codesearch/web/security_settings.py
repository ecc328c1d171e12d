"""The owners' security settings: how people sign in and join, shared by every replica.

What they hold (`Security`):

* ``password_login``: e-mail and password sign-in (default on);
* ``email_code_login``: a 6-digit code sent by e-mail (default off; works only when the service
  can send mail, `codesearch.mail`);
* ``disabled_providers``: the single sign-on providers of the config whose buttons are off
  (default: none, every provider signs in);
* ``require_approval``: people who join by themselves wait for an owner (default off);
* ``self_signup``: anyone may create an account (with a password on ``/signup``, or by an e-mail
  code for an address without an account); default off, so only invited or added people join;
* ``signin_message``: a text shown on the sign-in page (plain text, at most `MAX_MESSAGE` characters).

Precedence: an environment variable that is set wins and locks the switch on the page
(``AUTH_CREDENTIALS_LOGIN_ENABLED``, ``AUTH_EMAIL_CODE_LOGIN_ENABLED``,
``REQUIRE_APPROVAL_NEW_MEMBERS``: ``true`` or ``false``, as in Sourcebot 5); else the owners' choice
stored as the service setting ``security`` (`SETTING_KEY`); else the default above.

Each replica keeps what it read for `TTL_S` seconds (`codesearch.store.reread`: a sign-in must not
cost an extra read every time), so a change made on one replica reaches the others within that
time; the replica that stored it knows it at once. A failed read keeps the last value known, and
is logged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

from codesearch.errors import InvalidEnvironmentVariable
from codesearch.store.reread import Reread

if TYPE_CHECKING:
    from codesearch.store import Store

SETTING_KEY = "security"
TTL_S = 3.0
MAX_MESSAGE = 1000

PASSWORD_ENV = "AUTH_CREDENTIALS_LOGIN_ENABLED"
EMAIL_CODE_ENV = "AUTH_EMAIL_CODE_LOGIN_ENABLED"
APPROVAL_ENV = "REQUIRE_APPROVAL_NEW_MEMBERS"
#: the switches an environment variable may force, and its name
FORCEABLE = {"password_login": PASSWORD_ENV, "email_code_login": EMAIL_CODE_ENV, "require_approval": APPROVAL_ENV}


@dataclass(frozen=True)
class Security:
    """One state of the settings (see the module docstring)."""

    password_login: bool = True
    email_code_login: bool = False
    disabled_providers: frozenset[str] = field(default_factory=frozenset)
    require_approval: bool = False
    self_signup: bool = False
    signin_message: str = ""

    def provider_on(self, pid: str) -> bool:
        return pid not in self.disabled_providers

    def to_json(self) -> dict[str, Any]:
        value = asdict(self)
        value["disabled_providers"] = sorted(self.disabled_providers)
        return value

    @classmethod
    def from_json(cls, value: Any) -> Security:
        """The stored document, read leniently: what is missing or of the wrong type is the default."""
        if not isinstance(value, dict):
            return cls()
        base = cls()
        out: dict[str, Any] = {}
        for name in ("password_login", "email_code_login", "require_approval", "self_signup"):
            v = value.get(name)
            out[name] = v if isinstance(v, bool) else getattr(base, name)
        disabled = value.get("disabled_providers")
        out["disabled_providers"] = frozenset(
            p for p in (disabled if isinstance(disabled, list) else []) if isinstance(p, str)
        )
        msg = value.get("signin_message")
        out["signin_message"] = msg[:MAX_MESSAGE] if isinstance(msg, str) else ""
        return cls(**out)


def forced_from_env(environ: Mapping[str, str]) -> dict[str, bool]:
    """The switches the environment forces: ``{"password_login": False, …}`` for each variable set
    to ``true`` or ``false``; any other value is an `InvalidEnvironmentVariable`."""
    forced = {}
    for name, env in FORCEABLE.items():
        raw = (environ.get(env) or "").strip()
        if not raw:
            continue
        if raw.lower() not in ("true", "false"):
            raise InvalidEnvironmentVariable(env, raw, "true or false")
        forced[name] = raw.lower() == "true"
    return forced


def apply_forced(s: Security, forced: Mapping[str, bool]) -> Security:
    """`s` with the switches the environment forces."""
    for name, value in forced.items():
        s = replace(s, **{name: value})  # type: ignore[arg-type]
    return s


class SecuritySettings:
    """The current `Security` of one process (see the module docstring)."""

    def __init__(self, get_store: Callable[[], Store | None], forced: Mapping[str, bool], ttl_s: float = TTL_S):
        self.get_store = get_store
        self.forced = dict(forced)
        self.ttl_s = ttl_s
        self._stored = Reread(self.stored, Security(), ttl_s, "the security settings")

    def current(self) -> Security:
        """In force now: the stored choice (read at most once per `ttl_s`) under the environment."""
        return apply_forced(self._stored.get(), self.forced)

    def stored(self) -> Security:
        """The owners' choice as stored (read now), whatever the environment forces."""
        store = self.get_store()
        return Security.from_json(store.service_setting(SETTING_KEY) if store is not None else None)

    def save(self, settings: Security) -> bool:
        """Store the owners' choice for every replica; this one knows it at once. True when it changed."""
        store = self.get_store()
        if store is None:
            raise RuntimeError("this service runs without a state database: the settings cannot be stored")
        changed = store.put_service_setting(SETTING_KEY, settings.to_json())
        self._stored.set(settings)
        return changed


def usable_methods(
    s: Security, *, mail: bool, providers: Iterable[str], has_password: bool, linked: Iterable[str]
) -> list[str]:
    """The ways one user could still sign in under `s`: ``password`` (if they have one),
    ``email-code`` (if mail can be sent), each provider they have linked and that is on."""
    methods = []
    if s.password_login and has_password:
        methods.append("password")
    if s.email_code_login and mail:
        methods.append("email-code")
    on = set(providers)
    methods += sorted(p for p in set(linked) if p in on and s.provider_on(p))
    return methods
