"""The one progress-bar factory: every bar aflite shows is made by :func:`tqdm` here.

Why not ``tqdm.auto``: in Jupyter without ipywidgets it warns (``TqdmWarning: IProgress not found``) and falls back
to a text bar on stderr, one frame per update, which an executed notebook shows as a pink block of dozens of
frames. Here a notebook gets the widget bar when ipywidgets is importable and no bar at all otherwise (the result's
own display says what was done); a terminal gets tqdm's text bar on stderr, as before. tqdm is imported on first
use, so that ``import aflite`` stays cheap.
"""

from __future__ import annotations

import sys
import warnings
from functools import cache
from typing import Any

__all__ = ["in_notebook", "quiet_in_notebook", "tqdm", "widgets_available"]


def in_notebook() -> bool:
    """Whether this process is a Jupyter kernel (IPython with a kernel; a terminal IPython is not)."""
    shell = sys.modules.get("IPython")
    if shell is None:
        return False
    try:
        ip = shell.get_ipython()
    except AttributeError:
        return False
    return ip is not None and "IPKernelApp" in getattr(ip, "config", {})


@cache
def widgets_available() -> bool:
    """Whether ipywidgets can be imported (what tqdm's notebook bar needs)."""
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        return False
    return True


def quiet_in_notebook() -> None:
    """In a Jupyter kernel without ipywidgets, silence tqdm's "IProgress not found" warning for every importer of
    ``tqdm.auto`` (transformers, huggingface_hub): it would be the notebook's one stderr line. Called on import."""
    if in_notebook() and not widgets_available():
        warnings.filterwarnings("ignore", message="IProgress not found")


def tqdm(*args: Any, **kwargs: Any) -> Any:
    """A tqdm bar: the notebook widget in Jupyter with ipywidgets, a disabled bar in Jupyter without them (nothing
    written to stderr), tqdm's text bar elsewhere. Takes tqdm's own arguments."""
    if in_notebook():
        if widgets_available():
            from tqdm.notebook import tqdm as notebook_bar

            return notebook_bar(*args, **kwargs)
        kwargs["disable"] = True
    from tqdm import tqdm as text_bar

    return text_bar(*args, **kwargs)


quiet_in_notebook()
