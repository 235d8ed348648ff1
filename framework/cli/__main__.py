"""``python -m framework.cli``: the ``converge`` command."""

import sys

from framework.cli import main

sys.exit(main())
