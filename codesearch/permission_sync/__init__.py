"""Permission syncing: asking the code hosts who may read which private repository.

`hosts` names hosts (`host_key`), shared with single sign-on's linked accounts. The rule that
turns grants into what a caller sees is `codesearch.permissions`.
"""
