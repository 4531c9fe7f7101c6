"""``python -m aflitebench`` (with ``benchmarks/`` on ``PYTHONPATH``): the same as ``python benchmarks/bench.py``."""

import sys

from aflitebench.cli import main

sys.exit(main())
