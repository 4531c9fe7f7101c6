"""The versions a results.json records: aflite, Python, the numeric libraries, the platform and the kernel."""

from __future__ import annotations

import platform
import sys

import numpy as np

from aflite import __version__
from aflite.core import kernels

__all__ = ["versions"]


def versions() -> dict[str, str]:
    """What produced a result (for results.json's envelope)."""
    import scipy  # here, not at the top: `aflite --help` reads the CLI without scikit-learn
    import sklearn

    return {
        "aflite": __version__,
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "scikit-learn": sklearn.__version__,
        "platform": platform.platform(),
        "kernel": _kernel(),
    }


def _kernel() -> str:
    """Which own-row kernel the fast solver uses (results agree either way; speed differs)."""
    if not kernels.available():
        return "numpy"
    import numba

    return f"numba {numba.__version__}"
