"""Compiled inner loop of the ``fast`` solver: loss and gradient of many models over their own rows of a chunk.

Why a compiled loop: each model trains on t of the |S| rows, so a pass needs each row only for the ~m·t/|S|
models that train on it (5-6 of 64 at SNLI's shape). numpy can only do that by gathering each model's rows
and multiplying them by a 3-column weight matrix — memory-bound copies and narrow products that run at a
small fraction of the arithmetic rate. Here a chunk of S is walked in small tiles that stay in the L2 cache;
for each model the rows of the tile it trains on are read once, for the logits, the softmax, the loss and the
gradient together, so S is read from memory once per pass and every product is useful work.

The kernel is compiled with `numba <https://numba.pydata.org>`_ when it is installed (a dependency of
aflite); without it :mod:`aflite.core.solver` falls back to its numpy passes, which compute the same objective.
The loop order is fixed (tiles, then models, then rows), so the floating-point result depends only on the
inputs: the same bits for any number of threads or cluster workers, each block being one call sequence.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from numpy.typing import NDArray

from aflite.jit import Jit, compile_with
from aflite.threads import fit_workers

__all__ = ["available", "own_rows_pass", "compact_rows", "TILE_ROWS"]

TILE_ROWS = 256  # rows of a chunk walked by every model before the next tile (measured best of 32-1024 at d=768)
# Floats of the next tile asked for (one prefetch per 64-byte line) before each group of four rows: the rows a model
# reads are scattered over the tile, which the hardware prefetcher cannot follow, so the next tile is requested while
# this one is worked on (measured 165 -> 135-148 ns per (row, model) pair, one thread, d = 768, 64 models; 512-1024
# floats all within noise of each other).
PREFETCH_FLOATS = 768


def _own_rows_pass(A: Any, r0: int, pos: Any, lo: Any, hi: Any, y: Any, W: Any, bias: Any, inv_t: Any,
                   loss: Any, G: Any, Gb: Any, tile: int) -> None:  # pragma: no cover - compiled; tested through solver
    """Add to ``loss`` (nm,), ``G`` (nm, K, d) and ``Gb`` (nm, K) the weighted softmax loss and its gradient.

    ``A`` holds rows ``r0 : r0 + len(A)`` of S; model ``i`` trains on positions ``pos[lo[i]:hi[i]]`` (sorted,
    all inside the chunk), with labels ``y[pos]`` (y over all of S), weights ``W[i]`` (K, d) float32, bias
    ``bias[i]`` and per-row weight ``inv_t[i]``. Gradients of one chunk accumulate in float32 (as the numpy
    path's chunk products do) and are added to the float64 totals at the end.
    """
    R, d = A.shape
    nm, K = bias.shape
    cur = lo.copy()
    Z = np.zeros((4, K), dtype=np.float64)
    Rk = np.zeros((4, K), dtype=np.float32)
    Gc = np.zeros((nm, K, d), dtype=np.float32)
    lc = np.zeros(nm)  # this chunk's sums, added to the totals at the end: the same bits whether chunks
    bc = np.zeros((nm, K))  # accumulate straight into one total or into partials that are summed in order
    for t0 in range(0, R, tile):
        stop = r0 + min(R, t0 + tile)
        ahead = min(R, t0 + tile) * d  # the next tile, asked for a row at a time while this one is worked on
        ahead_end = min(R, t0 + 2 * tile) * d
        for i in range(nm):
            p = cur[i]
            e = p
            while e < hi[i] and pos[e] < stop:
                e += 1
            cur[i] = e
            w = inv_t[i]
            Wi = W[i]
            Gi = Gc[i]
            # rows in groups of four: each weight vector is loaded once per four rows, and each gradient
            # vector is read and written once per four rows (a padded slot repeats a row with weight 0)
            for g0 in range(p, e, 4):
                ahead = _ask_ahead(A, ahead, ahead_end)
                ng = min(4, e - g0)
                q0 = pos[g0]
                q1 = pos[g0 + 1] if ng > 1 else q0
                q2 = pos[g0 + 2] if ng > 2 else q0
                q3 = pos[g0 + 3] if ng > 3 else q0
                x0 = A[q0 - r0]
                x1 = A[q1 - r0]
                x2 = A[q2 - r0]
                x3 = A[q3 - r0]
                for k in range(K):
                    wk = Wi[k]
                    s0 = np.float32(0.0)
                    s1 = np.float32(0.0)
                    s2 = np.float32(0.0)
                    s3 = np.float32(0.0)
                    for j in range(d):
                        wj = wk[j]
                        s0 += wj * x0[j]
                        s1 += wj * x1[j]
                        s2 += wj * x2[j]
                        s3 += wj * x3[j]
                    Z[0, k] = s0
                    Z[1, k] = s1
                    Z[2, k] = s2
                    Z[3, k] = s3
                for u in range(4):
                    if u >= ng:
                        for k in range(K):
                            Rk[u, k] = 0.0
                        continue
                    yi = y[pos[g0 + u]]
                    zmax = -np.inf
                    for k in range(K):
                        Z[u, k] += bias[i, k]
                        if Z[u, k] > zmax:
                            zmax = Z[u, k]
                    zy = Z[u, yi] - zmax
                    se = 0.0
                    for k in range(K):
                        Z[u, k] = np.exp(Z[u, k] - zmax)
                        se += Z[u, k]
                    lc[i] += (np.log(se) - zy) * w
                    for k in range(K):
                        rk = Z[u, k] / se
                        if k == yi:
                            rk -= 1.0
                        rk *= w
                        bc[i, k] += rk
                        Rk[u, k] = rk
                for k in range(K):
                    a0 = Rk[0, k]
                    a1 = Rk[1, k]
                    a2 = Rk[2, k]
                    a3 = Rk[3, k]
                    gk = Gi[k]
                    for j in range(d):
                        gk[j] += a0 * x0[j] + a1 * x1[j] + a2 * x2[j] + a3 * x3[j]
    for i in range(nm):
        loss[i] += lc[i]
        for k in range(K):
            Gb[i, k] += bc[i, k]
            G[i, k] += Gc[i, k]


def _own_rows_pass3(A: Any, r0: int, pos: Any, lo: Any, hi: Any, y: Any, W: Any, bias: Any, inv_t: Any,
                    loss: Any, G: Any, Gb: Any, tile: int) -> None:  # pragma: no cover - compiled; tested
    """:func:`_own_rows_pass` for three classes (SNLI, MNLI), with two thirds of the arithmetic.

    The softmax depends only on differences of logits, so each row needs two dot products, with the weights of
    classes 1 and 2 relative to class 0 (``V_k = W_k - W_0``), not three. The residuals ``r_k = w (p_k - [k = y])``
    of a row sum to zero over the classes, so class 0's gradient is minus the sum of the other two and only two
    gradient vectors are accumulated: four multiply-adds per feature and row instead of six. The class loop sits
    inside the feature loop (each feature of four rows is loaded once for both classes), and the eight
    accumulators, two weight and four row vectors fit the sixteen AVX registers."""
    R, d = A.shape
    nm = bias.shape[0]
    cur = lo.copy()
    V = np.empty((nm, 2, d), dtype=np.float32)
    for i in range(nm):
        for j in range(d):
            V[i, 0, j] = W[i, 1, j] - W[i, 0, j]
            V[i, 1, j] = W[i, 2, j] - W[i, 0, j]
    Z = np.zeros((4, 3), dtype=np.float64)
    Rk = np.zeros((4, 3), dtype=np.float32)
    Gc = np.zeros((nm, 2, d), dtype=np.float32)
    lc = np.zeros(nm)
    bc = np.zeros((nm, 3))
    for t0 in range(0, R, tile):
        stop = r0 + min(R, t0 + tile)
        ahead = min(R, t0 + tile) * d  # the next tile, asked for a row at a time while this one is worked on
        ahead_end = min(R, t0 + 2 * tile) * d
        for i in range(nm):
            p = cur[i]
            e = p
            while e < hi[i] and pos[e] < stop:
                e += 1
            cur[i] = e
            w = inv_t[i]
            b1 = bias[i, 1] - bias[i, 0]
            b2 = bias[i, 2] - bias[i, 0]
            v1 = V[i, 0]
            v2 = V[i, 1]
            g1v = Gc[i, 0]
            g2v = Gc[i, 1]
            for g0 in range(p, e, 4):
                ahead = _ask_ahead(A, ahead, ahead_end)
                ng = min(4, e - g0)
                q0 = pos[g0]
                q1 = pos[g0 + 1] if ng > 1 else q0
                q2 = pos[g0 + 2] if ng > 2 else q0
                q3 = pos[g0 + 3] if ng > 3 else q0
                x0 = A[q0 - r0]
                x1 = A[q1 - r0]
                x2 = A[q2 - r0]
                x3 = A[q3 - r0]
                s01 = np.float32(0.0)
                s02 = np.float32(0.0)
                s11 = np.float32(0.0)
                s12 = np.float32(0.0)
                s21 = np.float32(0.0)
                s22 = np.float32(0.0)
                s31 = np.float32(0.0)
                s32 = np.float32(0.0)
                for j in range(d):
                    a = v1[j]
                    c = v2[j]
                    u0 = x0[j]
                    u1 = x1[j]
                    u2 = x2[j]
                    u3 = x3[j]
                    s01 += a * u0
                    s02 += c * u0
                    s11 += a * u1
                    s12 += c * u1
                    s21 += a * u2
                    s22 += c * u2
                    s31 += a * u3
                    s32 += c * u3
                Z[0, 1] = s01
                Z[0, 2] = s02
                Z[1, 1] = s11
                Z[1, 2] = s12
                Z[2, 1] = s21
                Z[2, 2] = s22
                Z[3, 1] = s31
                Z[3, 2] = s32
                for u in range(4):
                    if u >= ng:
                        for k in range(3):
                            Rk[u, k] = 0.0
                        continue
                    yi = y[pos[g0 + u]]
                    Z[u, 0] = 0.0
                    Z[u, 1] += b1
                    Z[u, 2] += b2
                    zmax = max(0.0, max(Z[u, 1], Z[u, 2]))
                    zy = Z[u, yi] - zmax
                    se = 0.0
                    for k in range(3):
                        Z[u, k] = np.exp(Z[u, k] - zmax)
                        se += Z[u, k]
                    lc[i] += (np.log(se) - zy) * w
                    for k in range(3):
                        rk = Z[u, k] / se
                        if k == yi:
                            rk -= 1.0
                        rk *= w
                        bc[i, k] += rk
                        Rk[u, k] = rk
                a01 = Rk[0, 1]
                a02 = Rk[0, 2]
                a11 = Rk[1, 1]
                a12 = Rk[1, 2]
                a21 = Rk[2, 1]
                a22 = Rk[2, 2]
                a31 = Rk[3, 1]
                a32 = Rk[3, 2]
                for j in range(d):
                    u0 = x0[j]
                    u1 = x1[j]
                    u2 = x2[j]
                    u3 = x3[j]
                    g1v[j] += a01 * u0 + a11 * u1 + a21 * u2 + a31 * u3
                    g2v[j] += a02 * u0 + a12 * u1 + a22 * u2 + a32 * u3
    for i in range(nm):
        loss[i] += lc[i]
        for k in range(3):
            Gb[i, k] += bc[i, k]
        for j in range(d):
            c1 = np.float64(Gc[i, 0, j])
            c2 = np.float64(Gc[i, 1, j])
            G[i, 1, j] += c1
            G[i, 2, j] += c2
            G[i, 0, j] -= c1 + c2


def _ask_ahead_rows(A: Any, ahead: int, ahead_end: int) -> int:  # pragma: no cover - compiled; inlined
    """Prefetch the next ``PREFETCH_FLOATS`` floats of ``A`` from flat offset ``ahead`` (one line per 16 floats,
    never past ``ahead_end``); returns where the next call starts. Both kernels call it once per group of rows."""
    if ahead < ahead_end:
        for o in range(ahead, min(ahead + PREFETCH_FLOATS, ahead_end), 16):
            _prefetch(A, o)
        ahead += PREFETCH_FLOATS
    return ahead


def _compact_rows(data: Any, pos: Any, lo: int, hi: int) -> None:  # pragma: no cover - compiled; tested
    """``data[i] = data[pos[i]]`` in place for ``lo <= i < hi``, in increasing i (``pos`` sorted, ``pos[i] >= i``):
    one read and one write per row, no temporary copy of the gathered rows."""
    d = data.shape[1]
    for i in range(lo, hi):
        p = pos[i]
        if p != i:
            for j in range(d):
                data[i, j] = data[p, j]


_compiled: Any = None
_compiled3: Any = None
_compact: Any = None
_prefetch: Any = None  # the compiled kernels' cache-line prefetch (llvm.prefetch), defined with numba
_ask_ahead: Any = None  # _ask_ahead_rows compiled (inlined into the kernels)


def _make_prefetch(numba: Any) -> Any:
    """``_prefetch(A, offset)``: ask for the cache line of element ``offset`` of the C-contiguous array ``A``
    into the outer caches (``llvm.prefetch``, read, locality 1: measured faster than 2, 3 or 0). A hint only:
    it changes no result."""
    from llvmlite import ir
    from numba.core import cgutils, types

    @numba.extending.intrinsic
    def prefetch(typingctx: Any, arr: Any, offset: Any) -> Any:  # pragma: no cover - compiled
        sig = types.void(arr, offset)

        def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
            ary = context.make_array(signature.args[0])(context, builder, args[0])
            ptr = builder.bitcast(builder.gep(ary.data, [args[1]]), ir.IntType(8).as_pointer())
            i32 = ir.IntType(32)
            fnty = ir.FunctionType(ir.VoidType(), [ir.IntType(8).as_pointer(), i32, i32, i32])
            fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0")
            builder.call(fn, [ptr, ir.Constant(i32, 0), ir.Constant(i32, 1), ir.Constant(i32, 1)])
            return context.get_dummy_value()

        return sig, codegen

    return prefetch


def _build(jit: Jit) -> tuple[Any, Any, Any]:
    """The two passes and the compaction loop compiled; the passes call the compiled prefetch and tile ask."""
    global _prefetch, _ask_ahead
    import numba
    import numba.extending

    _prefetch = _make_prefetch(numba)
    _ask_ahead = jit(_ask_ahead_rows, nogil=True, inline="always")
    return (jit(_own_rows_pass, nogil=True, fastmath=True), jit(_own_rows_pass3, nogil=True, fastmath=True),
            jit(_compact_rows, nogil=True))


def available() -> bool:
    """True when the compiled kernel can be used (numba importable; ``AFLITE_KERNEL=numpy`` turns it off)."""
    global _compiled, _compiled3, _compact
    if os.environ.get("AFLITE_KERNEL", "").strip().lower() == "numpy":
        return False
    if _compiled is None:
        loops = compile_with(_build, globals())
        _compiled, _compiled3, _compact = (False, None, None) if loops is None else loops
    return _compiled is not False


def own_rows_pass(A: NDArray[np.float32], r0: int, pos: NDArray[np.int64], lo: NDArray[np.int64],
                  hi: NDArray[np.int64], y: NDArray[np.int64], W: NDArray[np.float32], bias: NDArray[np.float64],
                  inv_t: NDArray[np.float64], loss: NDArray[np.float64], G: NDArray[np.float64],
                  Gb: NDArray[np.float64]) -> None:
    """Run the compiled kernel (call :func:`available` first); releases the GIL, so blocks run side by side."""
    kernel = _compiled3 if bias.shape[1] == 3 else _compiled  # three classes: the loop that loads rows once
    kernel(np.ascontiguousarray(A), r0, pos, lo, hi, y, W, bias, inv_t, loss, G, Gb, TILE_ROWS)


def compact_rows(data: NDArray[np.float32], pos: NDArray[np.intp]) -> bool:
    """Move rows ``pos`` (sorted, ``pos[i] >= i``) to the front of ``data`` in place with the compiled loop;
    False when the kernel is not available (the caller compacts in numpy).

    Large moves run on two threads, one per half of the destination: the first half's last few source rows lie
    in the second half's range (at most one per row removed before the middle), so they are copied aside first
    and put in place after both halves are done. A pure copy: the same bytes as one thread."""
    if not available() or not data.flags.c_contiguous:
        return False

    pos = np.ascontiguousarray(pos, dtype=np.int64)
    n = len(pos)
    if n < COMPACT_TWO_THREADS_ROWS or fit_workers(2) < 2:
        _compact(data, pos, 0, n)
        return True
    half = n // 2
    first_late = int(np.searchsorted(pos[:half], half))  # rows i < half whose source pos[i] >= half
    aside = data[pos[first_late:half]]  # a copy: the second half's writes may overwrite these sources

    with ThreadPoolExecutor(max_workers=2) as pool:  # the compiled loop releases the GIL
        done = [pool.submit(_compact, data, pos, 0, first_late), pool.submit(_compact, data, pos, half, n)]
        for f in done:
            f.result()
    data[first_late:half] = aside
    return True


COMPACT_TWO_THREADS_ROWS = 65536  # below this a second thread costs more than it saves
