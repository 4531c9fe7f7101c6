"""aflite.jit, the one numba compile step: cached machine code, else per process, else the plain Python loops; and
the four modules that use it, compiled for real where no cache folder is writable."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from unprivileged import obeying_mode_bits

from aflite.jit import Jit, compile_with

numba = pytest.importorskip("numba")

SRC = Path(__file__).resolve().parents[1] / "src"


def _twice(x: int) -> int:
    return 2 * x


def _helper(x: int) -> int:
    return x + 1


def _refusing_cache(monkeypatch: pytest.MonkeyPatch, refuse: Callable[[bool], bool]) -> list[bool]:
    """numba.njit replaced by one that raises numba's no-locator RuntimeError when ``refuse(cache)``; returns the
    cache settings it was asked for."""
    asked: list[bool] = []
    real = numba.njit

    def njit(**options: Any) -> Any:
        asked.append(bool(options["cache"]))
        if refuse(bool(options["cache"])):
            raise RuntimeError("cannot cache function '_twice': no locator available for file 'x.py'")
        return real(**{**options, "cache": False})

    monkeypatch.setattr(numba, "njit", njit)
    return asked


def test_the_build_gets_a_caching_jit_first() -> None:
    seen: list[Any] = []

    def build(jit: Jit) -> Callable[..., Any]:
        fn = jit(_twice, nogil=True)
        seen.append(fn)
        return fn

    fn = compile_with(build)
    assert fn is seen[0] and fn(21) == 42
    assert isinstance(fn, numba.core.registry.CPUDispatcher) and fn._cache.__class__.__name__ == "FunctionCache"


def test_no_writable_cache_folder_compiles_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = _refusing_cache(monkeypatch, lambda cache: cache)
    space: dict[str, object] = {"_helper": _helper, "other": 1}

    def build(jit: Jit) -> Callable[..., Any]:
        space["_helper"] = jit(_helper)  # rebound, then refused: restored before the retry
        assert space["_helper"] is not _helper
        return jit(_twice)

    first = True

    def failing_first(jit: Jit) -> Callable[..., Any]:
        nonlocal first
        if first:
            first = False
            space["_helper"] = "half-built"
            raise RuntimeError("cannot cache function: no locator available")
        assert space["_helper"] is _helper, "restored before the retry"
        return build(jit)

    fn = compile_with(failing_first, space)
    assert fn is not None and fn(4) == 8
    assert asked == [False, False]  # the first build raised before asking; the retry asked without a cache
    asked.clear()
    fn2 = compile_with(build, space)
    assert fn2 is not None and fn2(5) == 10 and asked == [True, False, False]


def test_refused_both_ways_gives_none_and_the_plain_helpers(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = _refusing_cache(monkeypatch, lambda cache: True)
    space: dict[str, object] = {"_helper": _helper}

    def build(jit: Jit) -> Callable[..., Any]:
        space["_helper"] = "compiled"
        return jit(_twice)

    assert compile_with(build, space) is None
    assert asked == [True, False] and space == {"_helper": _helper}


def test_without_numba_none_and_nothing_is_built(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "numba", None)  # ``import numba`` raises ImportError
    calls: list[Jit] = []
    assert compile_with(calls.append) is None and calls == []


def test_the_modules_fall_back_to_python_without_numba() -> None:
    """A child where ``import numba`` fails: the four modules run their plain loops, with the same results."""
    script = (
        "import sys; sys.modules['numba'] = None\n"
        "import json, numpy as np, scipy.sparse as sp\n"
        "from aflite import group_folds\nfrom aflite.core import kernels\nfrom aflite.features import spmm, "
        "ngram_hash\n"
        "a = sp.random(30, 20, density=0.2, format='csr', random_state=0, dtype=np.float64)\n"
        "b = np.arange(60, dtype=np.float64).reshape(20, 3)\n"
        "f = group_folds.stratified_group_folds(np.arange(40) % 2, np.arange(40) // 2, 3, 0)\n"
        "h = ngram_hash.murmur_counts(['a b c', 'b c d'], 'word', (1, 2), 1000)\n"
        "print(json.dumps([group_folds.compiled(), ngram_hash.compiled(), spmm._kernel() is None, "
        "kernels.available(), f.tolist(), h.indices.tolist(), np.allclose(spmm.csr_dense(a, b), a @ b)]))\n")
    out = subprocess.run([sys.executable, "-c", script], env={**os.environ, "PYTHONPATH": str(SRC)},
                         capture_output=True, text=True, check=True, timeout=300).stdout
    g, h, no_spmm, k, folds, idx, close = json.loads(out)
    assert (g, h, no_spmm, k, close) == (False, False, True, False, True)
    import numpy as np

    from aflite import group_folds
    from aflite.features import ngram_hash
    assert folds == group_folds.stratified_group_folds(np.arange(40) % 2, np.arange(40) // 2, 3, 0).tolist()
    assert idx == ngram_hash.murmur_counts(["a b c", "b c d"], "word", (1, 2), 1000).indices.tolist()


def test_the_modules_compile_where_no_cache_folder_is_writable(tmp_path: Path) -> None:
    """The package copied into a read-only folder, NUMBA_CACHE_DIR and the home folder read-only, in a child that
    obeys mode bits: numba refuses to cache, so every loop is compiled per process, and the results are the bits
    of this process's (cached) loops."""
    prefix = obeying_mode_bits()
    if prefix is None:
        pytest.skip("cannot start a child that obeys mode bits here")
    ro = tmp_path / "ro"
    shutil.copytree(SRC / "aflite", ro / "aflite", ignore=shutil.ignore_patterns("__pycache__"))
    for d in ("cache", "home"):
        (tmp_path / d).mkdir()
    script = (
        "import json, numpy as np, scipy.sparse as sp\n"
        "import aflite.jit as jit\nrefused = []\nreal = jit._njit\n"
        "def spy(numba, cache_code):\n    refused.append(cache_code)\n    return real(numba, cache_code)\n"
        "jit._njit = spy\n"
        "from aflite import group_folds\nfrom aflite.core import kernels\nfrom aflite.features import spmm, "
        "ngram_hash\n"
        "a = sp.random(300, 200, density=0.05, format='csr', random_state=0, dtype=np.float32)\n"
        "b = np.random.RandomState(1).rand(200, 5).astype(np.float32)\n"
        "f = group_folds.stratified_group_folds(np.arange(400) % 3, np.arange(400) // 4, 5, 0)\n"
        "h = ngram_hash.murmur_counts(['a b c', 'b c d e'], 'char_wb', (2, 4), 2**18)\n"
        "d = np.arange(12, dtype=np.float32).reshape(6, 2)\nmoved = kernels.compact_rows(d, np.array([1, 3, 5]))\n"
        "print(json.dumps([group_folds.compiled(), ngram_hash.compiled(), spmm._kernel() is not None, "
        "kernels.available(), moved, refused, f.tolist(), h.indices.tolist(), h.data.tolist(), "
        "spmm.csr_dense(a, b).tolist(), spmm.csr_t_dense(a.T.tocsr(), b).tolist(), d[:3].tolist()]))\n")
    for p in [ro, *ro.rglob("*")]:
        p.chmod(0o555 if p.is_dir() else 0o444)
    for d in ("cache", "home"):
        (tmp_path / d).chmod(0o555)
    env = {**os.environ, "PYTHONPATH": str(ro), "NUMBA_CACHE_DIR": str(tmp_path / "cache"),
           "HOME": str(tmp_path / "home"), "XDG_CACHE_HOME": str(tmp_path / "home"), "PYTHONDONTWRITEBYTECODE": "1"}
    try:
        proc = subprocess.run([*prefix, sys.executable, "-c", script], env=env, cwd=tmp_path, capture_output=True,
                              text=True, timeout=600)
    finally:
        for p in [ro, *ro.rglob("*"), tmp_path / "cache", tmp_path / "home"]:
            p.chmod(0o755)
    assert proc.returncode == 0, proc.stderr
    g, h, s, k, moved, refused, folds, idx, data, prod, prod_t, compacted = json.loads(proc.stdout)
    assert (g, h, s, k, moved) == (True, True, True, True, True)
    assert refused.count(False) == 5 and refused.count(True) == 5  # each of the five builds: refused, then per process
    assert not list(ro.rglob("*.nbi")) and not list((tmp_path / "cache").iterdir())

    import numpy as np
    import scipy.sparse as sp

    from aflite import group_folds
    from aflite.features import ngram_hash, spmm
    assert group_folds.compiled() and ngram_hash.compiled()
    assert folds == group_folds.stratified_group_folds(np.arange(400) % 3, np.arange(400) // 4, 5, 0).tolist()
    here = ngram_hash.murmur_counts(["a b c", "b c d e"], "char_wb", (2, 4), 2**18)
    assert (idx, data) == (here.indices.tolist(), here.data.tolist())
    a = sp.random(300, 200, density=0.05, format="csr", random_state=0, dtype=np.float32)
    b = np.random.RandomState(1).rand(200, 5).astype(np.float32)
    assert prod == spmm.csr_dense(a, b).tolist() and prod_t == spmm.csr_t_dense(a.T.tocsr(), b).tolist()
    assert compacted == [[2.0, 3.0], [6.0, 7.0], [10.0, 11.0]]
