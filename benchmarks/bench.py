"""The benchmark harness's command line (until issue #58 ``aflite bench``); every flag in ``--help``.

Usage: python benchmarks/bench.py [--tiny] [--shape imagenet|snli] [--embed MODEL] [--device DEV] [--out DIR] ...
Run from a checkout: aflite is imported from ``src/`` next to this folder when it is not installed.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # aflitebench, when this file is run by path from elsewhere
try:
    import aflite  # noqa: F401
except ImportError:  # a checkout without an installed aflite
    sys.path.insert(1, str(HERE.parent / "src"))

from aflitebench.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
