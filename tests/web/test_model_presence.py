"""A store value each replica re-reads at most once per TTL (codesearch/store/reread.py), as the
pages' "is a language model configured?" uses it (codesearch/web/model_presence.py): read once per
TTL, read again after it, the last value kept when a read fails, and no model without a store."""

from __future__ import annotations

from codesearch.store.reread import Reread
from codesearch.web.model_presence import model_presence


class Store:
    def __init__(self) -> None:
        self.models: list[dict] = []
        self.reads = 0
        self.broken = False

    def list_language_models(self) -> list[dict]:
        self.reads += 1
        if self.broken:
            raise OSError("the database is briefly unreadable")
        return list(self.models)


def test_read_once_per_ttl_and_again_after_it() -> None:
    store = Store()
    presence = model_presence(lambda: store, ttl_s=3.0)
    now = [0.0]
    presence.clock = lambda: now[0]
    assert presence.stale() and presence.get() is False
    store.models.append({"provider": "openai-compatible", "model": "m"})
    now[0] = 2.9
    assert not presence.stale() and presence.get() is False and store.reads == 1  # within the TTL: what was read
    now[0] = 3.0
    assert presence.get() is True and store.reads == 2
    store.models.clear()
    now[0] = 6.1
    assert presence.get() is False and store.reads == 3


def test_a_failed_read_keeps_the_last_value_and_is_tried_again_after_the_ttl(caplog) -> None:
    store, now = Store(), [0.0]
    store.models.append({"provider": "openai-compatible", "model": "m"})
    presence = model_presence(lambda: store, ttl_s=3.0)
    presence.clock = lambda: now[0]
    assert presence.get() is True
    store.broken, now[0] = True, 3.0
    assert presence.get() is True and "could not read the configured language models" in caplog.text
    assert presence.get() is True and store.reads == 2  # not again within the TTL
    store.broken, now[0] = False, 6.0
    store.models.clear()
    assert presence.get() is False and store.reads == 3


def test_what_this_replica_stored_is_known_at_once() -> None:
    reads = []
    value = Reread(lambda: reads.append(1) or "stored", "initial", ttl_s=60.0, what="x")
    assert value.last == "initial" and value.get() == "stored" and len(reads) == 1
    value.set("new")
    assert value.get() == "new" and value.last == "new" and len(reads) == 1


def test_no_store_no_model() -> None:
    assert model_presence(lambda: None).get() is False
