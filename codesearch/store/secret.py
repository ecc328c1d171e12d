"""The server secret: the HMAC key for API keys (and later, tokens): docs/security-model.md#secrets.

`SOURCEBOT_ENCRYPTION_KEY` wins when set (its UTF-8 bytes are the key). Otherwise the secret
lives in `<data_dir>/.secret`, created once with permissions 0600: 32 random bytes
(`secrets.token_bytes`), written as 64 hex characters, and the key is that text's UTF-8
bytes. So copying the file's content into `SOURCEBOT_ENCRYPTION_KEY` keeps every existing
API key valid, and moving to another data directory is just a copy of the file.

Several processes starting at once agree on one secret: the file is written to a temporary
name and hard-linked into place, which fails if another process got there first; the loser
then reads the winner's file. The file is never half-written.

The sign-in secret (`session_secret`): `AUTH_SECRET` when set (Sourcebot's name for the secret
that validates login session cookies), else a key derived from the server secret. It keys the
stored form of session cookies and the visitor CSRF token of the web UI, so changing
`AUTH_SECRET` signs everybody out, and every process of one deployment (Serve replicas on any
node) accepts the same cookies as long as they share the variable or the data directory.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import secrets
import stat
from collections.abc import Mapping

from codesearch.store.errors import StoreError
from codesearch.store.files import private_dir

log = logging.getLogger(__name__)

ENV_VAR = "SOURCEBOT_ENCRYPTION_KEY"
AUTH_SECRET_VAR = "AUTH_SECRET"
SECRET_FILE = ".secret"


def secret_path(data_dir: str | os.PathLike[str]) -> str:
    return os.path.join(os.fspath(data_dir), SECRET_FILE)


def load_server_secret(data_dir: str | os.PathLike[str], environ: Mapping[str, str] | None = None) -> bytes:
    """The server secret as bytes: from the environment, else the data directory's file (made once)."""
    environ = os.environ if environ is None else environ
    value = (environ.get(ENV_VAR) or "").strip()
    if value:
        return value.encode("utf-8")
    path = secret_path(data_dir)
    private_dir(data_dir)
    if not os.path.exists(path):
        _create(path)
    return _read(path)


def _create(path: str) -> None:
    tmp = f"{path}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(secrets.token_bytes(32).hex() + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o600)  # in case the umask was unusual
        try:
            os.link(tmp, path)
            log.info("generated the server secret in %s", path)
        except FileExistsError:
            pass  # another process made it first: use theirs
    finally:
        os.unlink(tmp)


def _read(path: str) -> bytes:
    mode = stat.S_IMODE(os.stat(path).st_mode)
    if mode & 0o077:
        log.warning("%s was readable by others (mode %o): restricting it to 0600", path, mode)
        os.chmod(path, 0o600)
    with open(path, "rb") as f:
        value = f.read().strip()
    if not value:
        raise StoreError(
            f"the server secret file {SECRET_FILE} of the data directory is empty: delete it to "
            f"generate a new one (existing API keys stop working) or set {ENV_VAR}"
        )
    return value


def session_secret(server_secret: bytes, environ: Mapping[str, str] | None = None) -> bytes:
    """The sign-in secret: `AUTH_SECRET`'s UTF-8 bytes when set, else derived from `server_secret`."""
    environ = os.environ if environ is None else environ
    value = (environ.get(AUTH_SECRET_VAR) or "").strip()
    if value:
        return value.encode("utf-8")
    return hmac.new(server_secret, b"codesearch derived key: web sign-in", hashlib.sha256).digest()
