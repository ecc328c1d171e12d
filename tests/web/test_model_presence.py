"""Whether a language model is configured (codesearch/web/model_presence.py): read from the store at
most once per TTL, re-read after it, and false without a store."""

from __future__ import annotations

from codesearch.web.model_presence import ModelPresence


class Store:
    def __init__(self) -> None:
        self.models: list[dict] = []
        self.reads = 0

    def list_language_models(self) -> list[dict]:
        self.reads += 1
        return list(self.models)


def test_read_once_per_ttl_and_again_after_it() -> None:
    store, now = Store(), [0.0]
    presence = ModelPresence(lambda: store, ttl_s=3.0, clock=lambda: now[0])
    assert presence.configured() is False
    store.models.append({"provider": "openai-compatible", "model": "m"})
    now[0] = 2.9
    assert presence.configured() is False and store.reads == 1  # within the TTL: what was read
    now[0] = 3.0
    assert presence.configured() is True and store.reads == 2
    store.models.clear()
    now[0] = 6.1
    assert presence.configured() is False and store.reads == 3


def test_no_store_no_model() -> None:
    assert ModelPresence(lambda: None).configured() is False
