"""``python -m codesearch``: the ``codesearch`` command."""

import sys

from codesearch.cli import main

sys.exit(main())
