"""Default values that several modules state, one place each.

Each of these was written out where it was used: the size limit of an indexed file in the
config model, the index builder, the index workers and the ``index`` command's help; the port
in the ``serve`` command, the launcher and the public URL. A default changed in one of those
places and not the others would make the command line, the service and the config disagree.

The config schema (``codesearch/config/schemas/v3/*.json``) is Sourcebot's, and states its own
defaults for ``maxFileSize`` and ``maxTrigramCount``: tests/engine/test_defaults.py checks they agree.
Plain values only, no imports: the engine core, the config and the service all read this.
"""

#: Files larger than this many bytes are not indexed (their names still are): ``settings.maxFileSize``.
MAX_FILE_SIZE = 2_097_152  # 2 MiB
#: Files with more distinct trigrams than this are not indexed (generated or random data): ``settings.maxTrigramCount``.
MAX_TRIGRAM_COUNT = 20_000

#: The most revisions (branches and tags) indexed per repository: ``CODESEARCH_MAX_INDEXED_REVISIONS``.
#: 64 is Sourcebot's cap (zoekt's branch masks were one 64-bit word); ours is a setting, at most
#: `MAX_INDEXED_REVISIONS_LIMIT` (docs/index-format.md#branch-masks: what more branches cost).
MAX_INDEXED_REVISIONS = 64
MAX_INDEXED_REVISIONS_LIMIT = 4096

#: Where ``codesearch serve`` listens by default: this machine only.
HOST = "127.0.0.1"
PORT = 3000
#: The public base URL of a service whose ``AUTH_URL`` is not set: the links in answers point here.
PUBLIC_URL = f"http://localhost:{PORT}"

#: ``codesearch serve``: shard searchers (partitions of the index), copies of each, HTTP replicas.
SEARCHERS = 2
SEARCHER_COPIES = 1
REPLICAS = 1

#: An index job that runs longer than this is cancelled: ``settings.repoIndexTimeoutMs`` (2 hours).
REPO_INDEX_TIMEOUT_MS = 7_200_000
