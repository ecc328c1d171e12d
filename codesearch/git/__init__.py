"""Everything codesearch does with git, through one runner (`process`).

* `process`: runs git (environment, time limits, scrubbing with `codesearch.redaction.Scrubber`,
  `process.GitFailed`); `slots`: how many git processes a server's callers may run at once;
* `paths`: what a caller may name (refs, paths, scopes), checked before git sees it;
* `objects`, `trees`, `commits`, `refs`, `diff`, `grep`, `history`: read-only answers at any
  ref (blobs, listings, logs, branches, diffs, ``git grep``, blame and tags);
* `dates`: the dates callers write and the ones git is given;
* `mirror`: bare clones of remote repositories; `revisions`: which refs get indexed.
"""
