"""codesearch: self-hosted code search on Ray.

    from codesearch import Client
    cs = Client.local("/path/to/index")          # or Client.http(url, api_key=...), Client.ray()
    cs.search("handle_request lang:python")

The distribution is published as ``codesearch-ray`` (the name ``codesearch`` on PyPI belongs to
an unrelated project); the import package and the command are ``codesearch``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from codesearch.client import Client

#: The name this project is installed under (``pip install codesearch-ray``).
DISTRIBUTION = "codesearch-ray"


def version() -> str:
    """The installed version of this project ("0+unknown" when run from a bare source tree)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed(DISTRIBUTION)
    except PackageNotFoundError:
        return "0+unknown"


# The client is imported on first use: the CLI and actors never pay for it.
def __getattr__(name: str) -> type[Client]:
    if name == "Client":
        from codesearch.client import Client

        return Client
    raise AttributeError(name)
