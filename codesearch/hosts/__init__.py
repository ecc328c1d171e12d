"""Code-host adapters: list the repositories of a connection (see `codesearch.hosts.base`)."""
