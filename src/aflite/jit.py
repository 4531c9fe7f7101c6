"""The one numba compile step of the fold loop, the n-gram hasher, the sparse products and the solver's kernel.

Why one: each compiles plain Python loops the same way: machine code cached when a cache folder is writable, else
(numba refuses ``cache=True`` with a RuntimeError) compiled per process; without numba, or when both are
refused, the caller runs its plain Python functions (the same output, slowly).
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from typing import Any, TypeVar

__all__ = ["Jit", "compile_with"]

T = TypeVar("T")
Jit = Callable[..., Callable[..., Any]]  # jit(fn, **options): numba.njit(cache=<chosen here>, **options)(fn)


def compile_with(build: Callable[[Jit], T], namespace: MutableMapping[str, object] | None = None) -> T | None:
    """``build(jit)``, caching the machine code, else compiling per process; None without numba or when both are
    refused. ``namespace``: the module globals ``build`` rebinds to compiled helpers (the compiled loops call what
    the globals name), restored before the retry and when None is returned (the plain loops call plain helpers)."""
    try:
        import numba
    except ImportError:  # pragma: no cover - numba is a dependency
        return None
    saved = dict(namespace or {})
    for cache_code in (True, False):
        try:
            return build(_njit(numba, cache_code))
        except RuntimeError:  # no writable cache folder (cache=True): compile per process
            if namespace is not None:
                namespace.update(saved)
    return None


def _njit(numba: Any, cache_code: bool) -> Jit:
    """The ``jit`` handed to a build: ``numba.njit`` with ``cache=cache_code`` and the build's options."""
    return lambda fn, **options: numba.njit(cache=cache_code, **options)(fn)
