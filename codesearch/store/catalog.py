"""What the config file declares besides connections: search contexts and language models.

Both are replaced as a whole each time the config is loaded (the file is the truth), and read
by name or in order by the search API and `ask_codebase`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import delete, insert, select

from codesearch.store.base import StoreBase
from codesearch.store.models import SearchContext
from codesearch.store.tables import language_models, search_contexts


class CatalogMixin(StoreBase):
    """The `Store` methods for search contexts and language models (mixed into `Store`)."""

    def replace_search_contexts(self, contexts: Iterable[SearchContext]) -> None:
        """Replace every search context at once (they come from the config file)."""
        now = self._now()
        rows = {}
        for ctx in contexts:
            rows[ctx.name] = {
                "name": ctx.name,
                "description": ctx.description or "",
                "repo_names": sorted(set(ctx.repo_names)),
                "updated_at": now,
            }
        with self._tx(write=True) as c:
            c.execute(delete(search_contexts))
            if rows:
                c.execute(insert(search_contexts), list(rows.values()))

    def find_search_context(self, name: str) -> SearchContext | None:
        with self._tx() as c:
            row = c.execute(select(search_contexts).where(search_contexts.c.name == name)).first()
            return SearchContext(row.name, list(row.repo_names), row.description) if row else None

    def list_search_contexts(self) -> list[SearchContext]:
        with self._tx() as c:
            return [
                SearchContext(r.name, list(r.repo_names), r.description)
                for r in c.execute(select(search_contexts).order_by(search_contexts.c.name))
            ]

    # ------------------------------------------------------------------ language models

    def replace_language_models(self, entries: Iterable[Mapping[str, Any]]) -> None:
        """Replace the configured models at once, in config order (the first is the default).
        Each entry is the raw `models` item (camelCase keys); it needs `provider` and `model`."""
        rows = []
        for i, entry in enumerate(entries):
            if not entry.get("provider") or not entry.get("model"):
                raise ValueError(f"models[{i}] needs a provider and a model")
            rows.append(
                {
                    "position": i,
                    "provider": str(entry["provider"]),
                    "model": str(entry["model"]),
                    "display_name": entry.get("displayName") or None,
                    "config": dict(entry),
                }
            )
        with self._tx(write=True) as c:
            c.execute(delete(language_models))
            if rows:
                c.execute(insert(language_models), rows)

    def list_language_models(self) -> list[dict[str, Any]]:
        """The raw model entries, in config order. They may hold token *references* and header
        values: show callers only provider, model and displayName."""
        with self._tx() as c:
            return [
                dict(r.config) for r in c.execute(select(language_models.c.config).order_by(language_models.c.position))
            ]
