"""``python -m aflite`` is the ``aflite`` command."""

import sys

from aflite.cli import main

sys.exit(main())
