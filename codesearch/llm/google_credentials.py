"""OAuth access tokens for the Google Vertex AI providers (google-vertex, google-vertex-anthropic).

    tokens = GoogleAccessTokens(key_file="/etc/codesearch/vertex-sa.json")   # or None: ADC
    headers["Authorization"] = f"Bearer {tokens.token()}"

A service-account key file (the entry's `credentials`, a token reference whose value is the
file's path, as in Sourcebot) is exchanged for an access token at the key's ``token_uri``;
without one, Google's application default credentials are used (GOOGLE_APPLICATION_CREDENTIALS,
gcloud's login, the metadata server). Tokens are cached and refreshed before they expire. This
needs the google-auth library of the ``gcp`` extra; `codesearch.config.model_providers` refuses the
providers at start-up when it is missing. Errors are `GoogleAuthError` with a message that
never holds a key or a token.
"""

from __future__ import annotations

import threading
from typing import Any

SCOPE = "https://www.googleapis.com/auth/cloud-platform"


class GoogleAuthError(Exception):
    """No access token could be had; the message says why (never a secret)."""


class GoogleAccessTokens:
    def __init__(self, key_file: str | None = None):
        self.key_file = key_file
        self._credentials: Any = None  # google.auth credentials, loaded on first use
        self._lock = threading.Lock()

    def _load(self) -> Any:  # google.auth credentials (google-auth is not fully annotated)
        import google.auth
        from google.auth import exceptions
        from google.oauth2 import service_account

        if self.key_file:
            try:
                return service_account.Credentials.from_service_account_file(self.key_file, scopes=[SCOPE])
            except FileNotFoundError:
                raise GoogleAuthError("the service-account key file named by `credentials` does not exist") from None
            except (ValueError, KeyError, OSError) as e:
                raise GoogleAuthError(
                    f"the file named by `credentials` is not a service-account key ({type(e).__name__})"
                ) from None
        try:
            credentials, _ = google.auth.default(scopes=[SCOPE])
        except exceptions.DefaultCredentialsError:
            raise GoogleAuthError(
                "no Google credentials: set `credentials` to a service-account key file, or "
                "GOOGLE_APPLICATION_CREDENTIALS"
            ) from None
        return credentials

    def token(self) -> str:
        """A valid access token, refreshed when it is missing or about to expire."""
        from google.auth import exceptions
        from google.auth.transport.requests import Request

        with self._lock:
            if self._credentials is None:
                self._credentials = self._load()
            if not self._credentials.valid:
                try:
                    self._credentials.refresh(Request())
                except exceptions.RefreshError as e:
                    reason = " ".join(str(e.args[0] if e.args else e).split())[:200]
                    raise GoogleAuthError(f"no access token from Google: {reason}") from None
                except exceptions.TransportError as e:
                    raise GoogleAuthError(f"the Google token endpoint cannot be reached ({type(e).__name__})") from None
            return str(self._credentials.token)
