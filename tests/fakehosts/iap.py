"""Google Cloud IAP's side of a request, on 127.0.0.1: the public key set and signed assertions.

`FakeIapKeys` serves ``GET /iap/verify/public_key-jwk`` (Google's path) with the public halves of
its EC P-256 keys (generated with joserfc, one to start with, more with `rotate`), and signs
assertions with them (`assertion`): ES256, ``iss`` ``https://cloud.google.com/iap``, the audience
given, ``sub``/``email`` of the person, ``iat`` now and ``exp`` in ten minutes, as IAP writes them
(any claim or header field can be overridden or removed). `down` makes the key set answer 500;
`fetches` counts the key set's requests.
"""

from __future__ import annotations

import hashlib
import time
import uuid

from joserfc import jwt
from joserfc.jwk import ECKey

from tests.fakehosts.server import FakeServer, send

JWKS_PATH = "/iap/verify/public_key-jwk"
ISSUER = "https://cloud.google.com/iap"
DROP = object()  # a claim or header value that removes it


def subject_of(email: str) -> str:
    """The ``sub`` IAP gives `email` here (a numeric account id made up from the address, any case)."""
    return "accounts.google.com:" + str(int(hashlib.sha256(email.lower().encode()).hexdigest()[:12], 16))


class FakeIapKeys(FakeServer):
    def __init__(self):
        super().__init__()
        self.keys: list[ECKey] = []
        self.down = False
        self.fetches = 0
        self.rotate()

    @property
    def jwks_url(self) -> str:
        return self.base_url + JWKS_PATH

    def rotate(self) -> ECKey:
        """A new key, published next to the old ones (as Google does while it rotates)."""
        key = ECKey.generate_key("P-256", parameters={"kid": uuid.uuid4().hex[:12]})
        self.keys.append(key)
        return key

    def handle(self, h) -> None:
        if h.path.split("?")[0] != JWKS_PATH:
            send(h, 404, {"error": "not found"}, {"Content-Type": "application/json"})
            return
        self.fetches += 1
        if self.down:
            send(h, 500, b"unavailable", {"Content-Type": "text/plain"})
            return
        body = {"keys": [{**k.as_dict(private=False), "alg": "ES256", "use": "sig"} for k in self.keys]}
        send(h, 200, body, {"Content-Type": "application/json"})

    def claims(self, audience: str, who: str, sub: str | None = None, **overrides) -> dict:
        """IAP's claims for the person with the address `who` (`overrides` win; `DROP` removes)."""
        now = int(time.time())
        claims = {"iss": ISSUER, "aud": audience, "sub": subject_of(who) if sub is None else sub,
                  "email": who, "iat": now, "exp": now + 600, "hd": who.rsplit("@", 1)[-1]}
        claims.update(overrides)
        return {k: v for k, v in claims.items() if v is not DROP}

    def assertion(self, audience: str, who: str, *, sub: str | None = None, key: ECKey | None = None,
                  header: dict | None = None, **claims) -> str:
        """An assertion IAP would send for the person with the address `who`, signed with `key`
        (default: the newest key); `claims` and `header` override or (`DROP`) remove fields."""
        key = key or self.keys[-1]
        head = {"alg": "ES256", "typ": "JWT", "kid": key.kid}
        head.update(header or {})
        head = {k: v for k, v in head.items() if v is not DROP}
        return jwt.encode(head, self.claims(audience, who, sub, **claims), key, algorithms=[head.get("alg", "ES256")])
