"""Service settings: small JSON documents every process of the service shares, by key.

Owners' choices made at run time live here (the permission rule's settings,
`codesearch.permissions`; anonymous access, `codesearch.service.anonymous`), and the database's
own random `instance_id`, which tells a process it opened the service's database.
"""

from __future__ import annotations

import secrets
from typing import Any

from sqlalchemy import insert, select, update

from codesearch.store.base import StoreBase
from codesearch.store.tables import service_settings

#: the service setting holding `instance_id`
INSTANCE_KEY = "instance"


class SettingsMixin(StoreBase):
    """The `Store` methods for service settings (mixed into `Store`)."""

    def put_service_setting(self, key: str, value: Any) -> bool:
        """Store a setting (JSON) for every process of the service; True when it changed."""
        now = self._now()
        with self._tx(write=True) as c:
            old = c.execute(select(service_settings.c.value).where(service_settings.c.key == key)).first()
            if old is not None and old.value == value:
                return False
            if old is None:
                c.execute(insert(service_settings).values(key=key, value=value, updated_at=now))
            else:
                c.execute(
                    update(service_settings).where(service_settings.c.key == key).values(value=value, updated_at=now)
                )
            return True

    def instance_id(self) -> str:
        """This database's own random id, made the first time it is asked for: processes that
        must be sure they opened the service's database (not a fresh file, not another
        ``DATABASE_URL``) compare it with the one the service published (`Client.ray`)."""
        found = self.service_setting(INSTANCE_KEY)
        if found:
            return str(found["id"])
        with self._tx(write=True) as c:  # write lock first: one id even when several ask at once
            row = c.execute(select(service_settings.c.value).where(service_settings.c.key == INSTANCE_KEY)).first()
            if row is not None:
                return str(row.value["id"])
            value = {"id": secrets.token_hex(16)}
            c.execute(insert(service_settings).values(key=INSTANCE_KEY, value=value, updated_at=self._now()))
            return value["id"]

    def service_setting(self, key: str) -> Any:
        """A setting stored by `put_service_setting`, or None."""
        with self._tx() as c:
            row = c.execute(select(service_settings.c.value).where(service_settings.c.key == key)).first()
            return None if row is None else row.value
