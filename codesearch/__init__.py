"""codesearch: self-hosted code search on Ray.

    from codesearch import Client
    cs = Client.local("/path/to/index")          # or Client.http(url, api_key=...), Client.ray()
    cs.search("handle_request lang:python")
"""


def __getattr__(name):  # the client is imported on first use: the CLI and actors never pay for it
    if name == "Client":
        from codesearch.client import Client

        return Client
    raise AttributeError(name)
