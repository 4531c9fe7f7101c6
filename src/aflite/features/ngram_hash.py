"""Hashed n-gram counts of many texts in one compiled pass (the probe's tokenizer and hasher of hypotheses).

Why: scikit-learn's ``HashingVectorizer`` builds every n-gram as a Python string before hashing it; on SNLI's
199,780 texts that was 11 s of one core (word 1-2 + char_wb 2-4), more than everything else the featurizer does
once the SVD is fitted on a sample. Here the texts are lowercased by Python (``str.lower``, as scikit-learn does),
decoded to one array of code points, and a loop compiled with numba (a dependency; without it the same loop runs
as plain Python, slowly, with the same output) walks them once per analyzer:

* **word**: tokens are maximal runs of word characters (``str.isalnum`` or ``_``) of at least two characters,
  as scikit-learn's default ``token_pattern`` ``(?u)\\b\\w\\w+\\b``; n-grams of consecutive tokens joined by a space.
* **char_wb**: each whitespace-separated word padded with one space each side; its character n-grams, and a word
  shorter than n once as a whole (scikit-learn's ``char_wb`` rule).

Each n-gram is hashed into ``n_features`` buckets; the output is a CSR count matrix with sorted column indices,
the same for any number of threads. Two hashes share these loops:

* :func:`hashed_counts` / :func:`hashed_parts` (the probe's): 64-bit FNV-1a over the code points, then the
  splitmix64 finaliser; buckets differ from scikit-learn's, the n-grams counted are the same.
* :func:`murmur_counts` (the featurizer's): MurmurHash3 (x86, 32-bit, seed 0) of the n-gram's UTF-8 bytes, encoded
  on the fly from the code points, bucket ``abs(h) % n_features`` as scikit-learn's _hashing_fast: bit for bit
  ``HashingVectorizer.transform`` (tests/test_ngram_hash.py checks both against scikit-learn).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from typing import Any

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

from aflite.jit import Jit, compile_with

__all__ = ["compiled", "hashed_counts", "hashed_parts", "murmur_counts"]

_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)
_SPACE = 32
_M32 = np.uint64(0xFFFFFFFF)
_MM_C1 = np.uint64(0xCC9E2D51)
_MM_C2 = np.uint64(0x1B873593)
CHUNK_ROWS = 8192  # rows per compiled call: small enough to spread over threads, large enough to amortise a call


@cache
def _word_table(full: bool) -> NDArray[np.bool_]:
    """Which code points are word characters (``\\w``: alphanumeric or underscore): those below 0x10000, or all
    of Unicode when ``full`` (0.2 s to build, so only for texts beyond the BMP: emoji are not word characters)."""
    size = 0x110000 if full else 0x10000
    table = np.fromiter((chr(c).isalnum() for c in range(size)), dtype=bool, count=size)
    table[ord("_")] = True
    return table


@cache
def _space_table() -> NDArray[np.bool_]:
    """Which code points below 0x10000 ``str.split()`` splits on (Unicode whitespace; none lies above)."""
    return np.fromiter((chr(c).isspace() for c in range(0x10000)), dtype=bool, count=0x10000)


def _finish(h: Any, mask: Any) -> Any:
    """splitmix64's finaliser (FNV alone leaves the low bits, the bucket, poorly mixed), then the bucket
    (``mask``: the number of buckets)."""
    h = (h ^ (h >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    h = (h ^ (h >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    h = h ^ (h >> np.uint64(31))
    return np.int64(h % mask)


def _rotl32(x: Any, r: int) -> Any:
    return ((x << np.uint64(r)) | (x >> np.uint64(32 - r))) & _M32


def _mm_byte(h: Any, acc: Any, nacc: Any, b: Any) -> tuple[Any, Any, Any]:
    """Feed one byte to MurmurHash3 (x86, 32-bit): four bytes make a little-endian block mixed into ``h``."""
    acc = acc | (np.uint64(b) << (np.uint64(8) * nacc))
    nacc = nacc + np.uint64(1)
    if nacc == np.uint64(4):
        k = _rotl32((acc * _MM_C1) & _M32, 15)
        h = h ^ ((k * _MM_C2) & _M32)
        h = (_rotl32(h, 13) * np.uint64(5) + np.uint64(0xE6546B64)) & _M32
        acc = np.uint64(0)
        nacc = np.uint64(0)
    return h, acc, nacc


def _h_add(h: Any, acc: Any, nacc: Any, nbytes: Any, c: Any, kind: int) -> tuple[Any, Any, Any, Any]:
    """Add code point ``c`` to a running hash: FNV-1a over code points (kind 0), or MurmurHash3 over its UTF-8
    bytes (kind 1; ``acc``/``nacc`` the bytes of the unfinished block, ``nbytes`` the length so far)."""
    if kind == 0:
        return (h ^ np.uint64(c)) * _FNV_PRIME, acc, nacc, nbytes
    c = np.uint64(c)
    if c < np.uint64(0x80):
        h, acc, nacc = _mm_byte(h, acc, nacc, c)
        return h, acc, nacc, nbytes + np.uint64(1)
    if c < np.uint64(0x800):
        h, acc, nacc = _mm_byte(h, acc, nacc, np.uint64(0xC0) | (c >> np.uint64(6)))
        n = np.uint64(2)
    elif c < np.uint64(0x10000):
        h, acc, nacc = _mm_byte(h, acc, nacc, np.uint64(0xE0) | (c >> np.uint64(12)))
        h, acc, nacc = _mm_byte(h, acc, nacc, np.uint64(0x80) | ((c >> np.uint64(6)) & np.uint64(0x3F)))
        n = np.uint64(3)
    else:
        h, acc, nacc = _mm_byte(h, acc, nacc, np.uint64(0xF0) | (c >> np.uint64(18)))
        h, acc, nacc = _mm_byte(h, acc, nacc, np.uint64(0x80) | ((c >> np.uint64(12)) & np.uint64(0x3F)))
        h, acc, nacc = _mm_byte(h, acc, nacc, np.uint64(0x80) | ((c >> np.uint64(6)) & np.uint64(0x3F)))
        n = np.uint64(4)
    h, acc, nacc = _mm_byte(h, acc, nacc, np.uint64(0x80) | (c & np.uint64(0x3F)))
    return h, acc, nacc, nbytes + n


def _h_start(kind: int) -> Any:
    """The running hash's first value: FNV's offset basis, or murmur's seed 0 (scikit-learn's)."""
    return _FNV_OFFSET if kind == 0 else np.uint64(0)


def _h_bucket(h: Any, acc: Any, nacc: Any, nbytes: Any, kind: int, mask: Any) -> Any:
    """The bucket of a finished hash. Murmur: the tail block, the length, fmix32, read as a signed int32 ``s``;
    bucket ``abs(s) % n_features``, and ``(2**31 - 1 - (n_features - 1)) % n_features`` for ``s == -2**31``
    (scikit-learn's _hashing_fast, where abs would overflow)."""
    if kind == 0:
        return _finish(h, mask)
    if nacc > np.uint64(0):
        k = _rotl32((acc * _MM_C1) & _M32, 15)
        h = h ^ ((k * _MM_C2) & _M32)
    h = h ^ (nbytes & _M32)
    h = h ^ (h >> np.uint64(16))
    h = (h * np.uint64(0x85EBCA6B)) & _M32
    h = h ^ (h >> np.uint64(13))
    h = (h * np.uint64(0xC2B2AE35)) & _M32
    h = h ^ (h >> np.uint64(16))
    nf = np.int64(mask)
    if h == np.uint64(0x80000000):
        return (np.int64(2147483647) - (nf - 1)) % nf
    if h > np.uint64(0x80000000):  # negative as int32: abs is 2**32 - h
        return np.int64(np.uint64(0x100000000) - h) % nf
    return np.int64(h) % nf


def _is_word(c: Any, table: Any) -> bool:
    return table[c]


def _is_space(c: Any, table: Any) -> bool:
    return c < 0x10000 and table[c]


def _word_rows(cp: Any, starts: Any, lo_n: int, hi_n: int, mask: Any, table: Any, out: Any, out_starts: Any,
               count_only: bool, kind: int) -> None:
    """Word n-gram buckets of rows ``starts[i]:starts[i+1]`` into ``out[out_starts[i]:]`` (or only their number
    into ``out_starts[i + 1]`` when ``count_only``)."""
    for r in range(len(starts) - 1):
        a, b = starts[r], starts[r + 1]
        # the tokens of this row: (begin, end) pairs; a text has at most (b - a + 1) // 3 tokens of >= 2 chars
        tb = np.empty((b - a) // 2 + 1, dtype=np.int64)
        te = np.empty((b - a) // 2 + 1, dtype=np.int64)
        nt = 0
        j = a
        while j < b:
            if _is_word(cp[j], table):
                k = j
                while k < b and _is_word(cp[k], table):
                    k += 1
                if k - j >= 2:
                    tb[nt] = j
                    te[nt] = k
                    nt += 1
                j = k
            else:
                j += 1
        pos = out_starts[r]
        emitted = 0
        for n in range(lo_n, hi_n + 1):
            for t in range(nt - n + 1):
                if not count_only:
                    h, acc, nacc, nb = _h_start(kind), np.uint64(0), np.uint64(0), np.uint64(0)
                    for u in range(t, t + n):
                        if u > t:
                            h, acc, nacc, nb = _h_add(h, acc, nacc, nb, _SPACE, kind)
                        for q in range(tb[u], te[u]):
                            h, acc, nacc, nb = _h_add(h, acc, nacc, nb, cp[q], kind)
                    out[pos + emitted] = _h_bucket(h, acc, nacc, nb, kind, mask)
                emitted += 1
        if count_only:
            out_starts[r + 1] = emitted


def _char_wb_rows(cp: Any, starts: Any, lo_n: int, hi_n: int, mask: Any, table: Any, out: Any, out_starts: Any,
                  count_only: bool, kind: int) -> None:
    """char_wb n-gram buckets of each row (see :func:`_word_rows` for the layout)."""
    for r in range(len(starts) - 1):
        a, b = starts[r], starts[r + 1]
        pos = out_starts[r]
        emitted = 0
        j = a
        while j < b:
            if _is_space(cp[j], table):
                j += 1
                continue
            k = j
            while k < b and not _is_space(cp[k], table):
                k += 1
            length = k - j + 2  # the word padded with a space each side: position p is cp[j + p - 1]
            for n in range(lo_n, hi_n + 1):
                last = max(0, length - n)
                for s in range(last + 1):
                    if not count_only:
                        h, acc, nacc, nb = _h_start(kind), np.uint64(0), np.uint64(0), np.uint64(0)
                        for p in range(s, min(s + n, length)):
                            c = _SPACE if p == 0 or p == length - 1 else cp[j + p - 1]
                            h, acc, nacc, nb = _h_add(h, acc, nacc, nb, c, kind)
                        out[pos + emitted] = _h_bucket(h, acc, nacc, nb, kind, mask)
                    emitted += 1
                if length <= n:  # the whole padded word was emitted: longer n would repeat it (scikit-learn)
                    break
            j = k
        if count_only:
            out_starts[r + 1] = emitted


def _to_csr(buckets: Any, out_starts: Any, indptr: Any, indices: Any, data: Any) -> None:
    """Per row: sort its buckets and count each once (CSR with sorted indices; ``indptr`` filled here)."""
    nnz = 0
    indptr[0] = 0
    for r in range(len(out_starts) - 1):
        row = buckets[out_starts[r]:out_starts[r + 1]]
        row.sort()  # in place: no array per row (the buckets are not needed unsorted afterwards)
        i = 0
        while i < len(row):
            k = i
            while k < len(row) and row[k] == row[i]:
                k += 1
            indices[nnz] = row[i]
            data[nnz] = k - i
            nnz += 1
            i = k
        indptr[r + 1] = nnz


@cache
def _kernels() -> tuple[Callable[..., None], Callable[..., None], Callable[..., None], bool]:
    """The three loops, compiled with numba (see :mod:`aflite.jit`), else the plain Python functions (the same
    output)."""
    g = sys.modules[__name__].__dict__

    def build(jit: Jit) -> tuple[Callable[..., None], Callable[..., None], Callable[..., None]]:
        g.update({name: jit(g[name], nogil=True, inline="always")  # the compiled loops call the compiled helpers
                  for name in ("_finish", "_rotl32", "_mm_byte", "_h_add", "_h_start", "_h_bucket", "_is_word",
                               "_is_space")})
        return jit(_word_rows, nogil=True), jit(_char_wb_rows, nogil=True), jit(_to_csr, nogil=True)

    loops = compile_with(build, g)
    return (_word_rows, _char_wb_rows, _to_csr, False) if loops is None else (*loops, True)


def compiled() -> bool:
    """Whether the loops run as machine code (numba); else as plain Python (slow, same output)."""
    return _kernels()[3]


def _code_points(texts: Sequence[str]) -> tuple[NDArray[np.uint32], NDArray[np.int64]]:
    """All texts, lowercased, as one array of code points and the row starts (``len(texts) + 1`` offsets)."""
    lowered = [t.lower() for t in texts]
    starts = np.zeros(len(lowered) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, lowered), dtype=np.int64, count=len(lowered)), out=starts[1:])
    cp = np.frombuffer("".join(lowered).encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    return cp, starts


def _chunk(args: tuple[Any, ...]) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float32]]:
    rows_fn, to_csr, cp, starts, lo, hi, mask, table, kind = args
    counts = np.zeros(len(starts), dtype=np.int64)
    rows_fn(cp, starts, lo, hi, mask, table, counts, counts, True, kind)
    out_starts = np.zeros(len(starts), dtype=np.int64)
    np.cumsum(counts[1:], out=out_starts[1:])
    buckets = np.empty(int(out_starts[-1]), dtype=np.int64)
    rows_fn(cp, starts, lo, hi, mask, table, buckets, out_starts, False, kind)
    indptr = np.empty(len(starts), dtype=np.int64)
    indices = np.empty(len(buckets), dtype=np.int64)
    data = np.empty(len(buckets), dtype=np.float32)
    to_csr(buckets, out_starts, indptr, indices, data)
    nnz = int(indptr[-1])
    return indptr, indices[:nnz].copy(), data[:nnz].copy()


def _parts(texts: Sequence[str], analyzer: str, ngram_range: tuple[int, int], n_features: int, threads: int,
           kind: int) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float32]]:
    """The CSR arrays of the n-gram counts, hashed by FNV (``kind`` 0) or scikit-learn's murmur (1): the texts'
    code points in chunks of ``CHUNK_ROWS`` rows, ``threads`` chunks side by side, joined in row order."""
    if analyzer not in ("word", "char_wb"):
        raise ValueError(f"analyzer must be 'word' or 'char_wb', got {analyzer!r}")
    word_fn, char_fn, to_csr, _ = _kernels()
    cp, starts = _code_points(texts)
    if analyzer == "word":
        rows_fn, table = word_fn, _word_table(bool(len(cp)) and int(cp.max()) >= 0x10000)
    else:
        rows_fn, table = char_fn, _space_table()
        if kind == 1 and bool(((cp >= 0xD800) & (cp <= 0xDFFF)).any()):
            "".join(texts).encode("utf-8")  # a lone surrogate: UTF-8 refuses it, as scikit-learn's hasher does
    lo, hi = int(ngram_range[0]), int(ngram_range[1])
    mask = np.uint64(n_features)
    n = len(texts)
    bounds = list(range(0, n, CHUNK_ROWS)) + [n]
    jobs = [(rows_fn, to_csr, cp, starts[s:e + 1], lo, hi, mask, table, kind)
            for s, e in zip(bounds[:-1], bounds[1:], strict=True)]
    if threads > 1 and len(jobs) > 1:
        with ThreadPoolExecutor(max_workers=threads) as pool:
            parts = list(pool.map(_chunk, jobs))
    else:
        parts = [_chunk(j) for j in jobs]
    if not parts:
        return np.zeros(1, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float32)
    offsets = np.cumsum([0] + [int(p[0][-1]) for p in parts])
    indptr = np.concatenate([parts[0][0][:1]] + [p[0][1:] + o for p, o in zip(parts, offsets, strict=False)])
    return indptr, np.concatenate([p[1] for p in parts]), np.concatenate([p[2] for p in parts])


def hashed_parts(texts: Sequence[str], analyzer: str, ngram_range: tuple[int, int], n_features: int,
                 threads: int = 1) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float32]]:
    """The CSR arrays (indptr, int64 column indices sorted per row, float32 counts) of :func:`hashed_counts`;
    ``n_features`` may be up to 2**63 (a vocabulary without collisions, in effect: the probe's)."""
    if not 1 <= n_features <= 2**63:
        raise ValueError(f"n_features must be in [1, 2**63], got {n_features}")
    return _parts(texts, analyzer, ngram_range, n_features, threads, 0)


def hashed_counts(texts: Sequence[str], analyzer: str, ngram_range: tuple[int, int], n_features: int,
                  threads: int = 1) -> sp.csr_matrix:
    """n-gram counts of ``texts`` (``analyzer`` "word" or "char_wb") hashed into ``n_features`` (< 2**31)
    buckets: a float32 CSR matrix, one row per text. ``threads`` chunks of rows run side by side (the compiled
    loops release the GIL); the result does not depend on it."""
    if n_features > np.iinfo(np.int32).max:
        raise ValueError(f"n_features must be < 2**31 for a CSR matrix, got {n_features}")
    indptr, indices, data = hashed_parts(texts, analyzer, ngram_range, n_features, threads)
    return sp.csr_matrix((data, indices.astype(np.int32), indptr), shape=(len(texts), n_features))


def murmur_counts(texts: Sequence[str], analyzer: str, ngram_range: tuple[int, int], n_features: int,
                  threads: int = 1) -> sp.csr_matrix:
    """Bit for bit ``HashingVectorizer(analyzer=analyzer, ngram_range=ngram_range, n_features=n_features,
    lowercase=True, alternate_sign=False, norm=None, dtype=np.float32).transform(texts)`` (the featurizer's
    counts): the same n-grams as :func:`hashed_counts`, in scikit-learn's buckets (MurmurHash3 of their UTF-8
    bytes), with its int32 indices and indptr; the result does not depend on ``threads``."""
    if not 1 <= n_features <= np.iinfo(np.int32).max:
        raise ValueError(f"n_features must be in [1, 2**31 - 1], got {n_features}")
    indptr, indices, data = _parts(texts, analyzer, ngram_range, n_features, threads, 1)
    index_type = np.int32 if len(indices) <= np.iinfo(np.int32).max else np.int64
    return sp.csr_matrix((data, indices.astype(index_type), indptr.astype(index_type)),
                         shape=(len(texts), n_features))
