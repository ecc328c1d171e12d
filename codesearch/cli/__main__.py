"""``python -m codesearch.cli``: the ``codesearch`` command (as ``python -m codesearch``)."""

import sys

from codesearch.cli import main

sys.exit(main())
