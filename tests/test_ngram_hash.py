"""The compiled n-gram hashers (issue #57): the probe's (FNV) counts exactly scikit-learn's analyzers' n-grams,
hashed by the documented hash; the featurizer's (murmur) is bit for bit ``HashingVectorizer.transform``; neither
output depends on the thread count."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from aflite.data import demo_dataset_path
from aflite.features.ngram_hash import hashed_counts, hashed_parts, murmur_counts

TEXTS = ["Hello, World!  a b  cd", "", "x", "Ünïcode ß straße naïve café_1", "  lead trail  ",
         "a\u00a0bc\u2003de", "𝔘nicode 😀 ok", "A man is playing a guitar on stage.", "The the THE the."] * 3
# edge cases for the murmur path: emoji runs (not word characters), scripts beyond Latin, combining accents,
# controls and tabs/newlines, one-character words, 4-byte UTF-8 and digits/underscores inside words
EDGE = TEXTS + ["😀😀 x😀y 𝔘𝔘𝔘 🇫🇷", "e\u0301te\u0301 café Ǆemal İstanbul", "日本語のテキスト 中文",
                "ab\tc\nde\r\nfg\x0bhi\x1cjk",
                "a b c d e f", "I", "  ", "\n", "x_1 __ 42 4.2 3rd", "Привет мир ΣΊΣΥΦΟΣ", "مرحبا بالعالم", "aivlts3m",
                "ahft$u^ x"]


def _reference(texts: list[str], analyzer: str, ngram_range: tuple[int, int], n_features: int) -> sp.csr_matrix:
    """scikit-learn's own analyzer's n-gram strings, hashed in Python by FNV-1a 64 + the splitmix64 finaliser."""
    from sklearn.feature_extraction.text import HashingVectorizer

    analyze = HashingVectorizer(analyzer=analyzer, ngram_range=ngram_range, lowercase=True).build_analyzer()
    m64 = (1 << 64) - 1
    rows, cols = [], []
    for i, text in enumerate(texts):
        for gram in analyze(text):
            h = 0xCBF29CE484222325
            for ch in gram:
                h = ((h ^ ord(ch)) * 0x100000001B3) & m64
            h ^= h >> 30
            h = (h * 0xBF58476D1CE4E5B9) & m64
            h ^= h >> 27
            h = (h * 0x94D049BB133111EB) & m64
            h ^= h >> 31
            rows.append(i)
            cols.append(h % n_features)
    return sp.csr_matrix((np.ones(len(rows), np.float32), (rows, cols)), shape=(len(texts), n_features))


@pytest.mark.parametrize(("analyzer", "ngram_range"), [("word", (1, 2)), ("char_wb", (2, 4)), ("word", (1, 3)),
                                                       ("char_wb", (1, 5))])
@pytest.mark.parametrize("n_features", [2**20, 1000])
def test_counts_equal_scikit_learns_ngrams(analyzer: str, ngram_range: tuple[int, int], n_features: int) -> None:
    got = hashed_counts(TEXTS, analyzer, ngram_range, n_features)
    want = _reference(TEXTS, analyzer, ngram_range, n_features)
    assert got.shape == want.shape and got.dtype == np.float32 and got.has_sorted_indices
    assert abs(got - want).sum() == 0 and got.nnz == want.nnz


def test_threads_and_chunks_do_not_change_the_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    import aflite.features.ngram_hash as nh

    texts = [f"text number {i} with word{i % 7} and more" for i in range(500)] + TEXTS
    one = hashed_counts(texts, "char_wb", (2, 4), 2**18, threads=1)
    monkeypatch.setattr(nh, "CHUNK_ROWS", 37)  # many chunks, side by side
    two = hashed_counts(texts, "char_wb", (2, 4), 2**18, threads=2)
    assert (one != two).nnz == 0 and np.array_equal(one.indptr, two.indptr)
    indptr, indices, _ = hashed_parts(texts, "word", (1, 2), 2**63)  # the probe's collision-free vocabulary
    assert indices.dtype == np.int64 and indices.max() > 2**40 and indptr[-1] == len(indices)


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="analyzer"):
        hashed_counts(TEXTS, "char", (2, 4), 16)
    with pytest.raises(ValueError, match="2\\*\\*31"):
        hashed_counts(TEXTS, "word", (1, 2), 2**40)


def _snli_texts() -> list[str]:
    """Both text fields of the bundled SNLI sample (5,898 texts)."""
    import gzip

    with gzip.open(demo_dataset_path(), "rt", encoding="utf-8") as fh:
        rows = [line.rstrip("\n").split("\t") for line in fh][1:]
    return [r[1] for r in rows] + [r[2] for r in rows]


def _assert_same_as_scikit_learn(texts: list[str], analyzer: str, ngram_range: tuple[int, int],
                                 n_features: int, threads: int = 1) -> None:
    from sklearn.feature_extraction.text import HashingVectorizer

    want = HashingVectorizer(analyzer=analyzer, ngram_range=ngram_range, n_features=n_features, lowercase=True,
                             alternate_sign=False, norm=None, dtype=np.float32).transform(texts)
    got = murmur_counts(texts, analyzer, ngram_range, n_features, threads=threads)
    assert got.shape == want.shape and got.nnz > 0
    for name in ("indptr", "indices", "data"):
        a, b = getattr(got, name), getattr(want, name)
        assert a.dtype == b.dtype and np.array_equal(a, b), name


@pytest.mark.parametrize(("analyzer", "ngram_range"), [("word", (1, 2)), ("char_wb", (2, 4)), ("word", (1, 1)),
                                                       ("word", (2, 4)), ("word", (1, 3)), ("char_wb", (1, 1)),
                                                       ("char_wb", (1, 3)), ("char_wb", (3, 9))])
@pytest.mark.parametrize("n_features", [2**20, 1000, 7])
def test_murmur_counts_are_hashing_vectorizers_bit_for_bit(analyzer: str, ngram_range: tuple[int, int],
                                                           n_features: int) -> None:
    _assert_same_as_scikit_learn(EDGE, analyzer, ngram_range, n_features)


@pytest.mark.parametrize(("analyzer", "ngram_range"), [("word", (1, 2)), ("char_wb", (2, 4))])
def test_murmur_counts_on_snli_equal_hashing_vectorizers(analyzer: str, ngram_range: tuple[int, int]) -> None:
    _assert_same_as_scikit_learn(_snli_texts(), analyzer, ngram_range, 2**20, threads=2)


@pytest.mark.parametrize(("text", "analyzer", "ngram_range"), [("aivlts3m", "word", (1, 1)),
                                                               ("ahft$u^", "char_wb", (9, 9))])
def test_the_hash_minus_2_31_lands_where_scikit_learn_puts_it(text: str, analyzer: str,
                                                              ngram_range: tuple[int, int]) -> None:
    """abs(-2**31) overflows an int32: scikit-learn maps it to (2**31 - 1 - (n - 1)) % n, so must we."""
    from sklearn.utils import murmurhash3_32

    gram = text if analyzer == "word" else f" {text} "
    assert murmurhash3_32(gram, seed=0) == -(2**31)  # the one n-gram of this text hits the corner case
    for n_features in (2**20, 1000, 3):
        got = murmur_counts([text], analyzer, ngram_range, n_features)
        assert got.indices.tolist() == [(2**31 - 1 - (n_features - 1)) % n_features]
        _assert_same_as_scikit_learn([text, text.upper()], analyzer, ngram_range, n_features)


def test_murmur_counts_do_not_depend_on_threads_or_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    import aflite.features.ngram_hash as nh

    texts = _snli_texts()[:1500] + EDGE
    one = murmur_counts(texts, "word", (1, 2), 2**20, threads=1)
    monkeypatch.setattr(nh, "CHUNK_ROWS", 37)  # many chunks, side by side
    two = murmur_counts(texts, "word", (1, 2), 2**20, threads=2)
    for name in ("indptr", "indices", "data"):
        assert np.array_equal(getattr(one, name), getattr(two, name)), name


def test_the_python_fallback_gives_the_same_counts() -> None:
    """Without compiled loops (numba's jit disabled: the plain Python functions run) the same output, slowly."""
    import json
    import os
    import subprocess
    import sys

    texts = EDGE[-14:]
    script = ("import json, sys; from aflite.features.ngram_hash import murmur_counts, hashed_counts; "
              "t = json.loads(sys.stdin.read()); "
              "m = [murmur_counts(t, a, r, 1000) for a, r in (('word', (1, 2)), ('char_wb', (2, 4)))]; "
              "f = hashed_counts(t, 'char_wb', (2, 4), 1000); "
              "print(json.dumps([[x.indptr.tolist(), x.indices.tolist(), x.data.tolist()] "
              "for x in m + [f]]))")
    env = {**os.environ, "NUMBA_DISABLE_JIT": "1"}
    out = subprocess.run([sys.executable, "-c", script], input=json.dumps(texts), env=env, capture_output=True,
                         text=True, check=True, timeout=300).stdout
    slow = json.loads(out)
    fast = [murmur_counts(texts, a, r, 1000) for a, r in (("word", (1, 2)), ("char_wb", (2, 4)))]
    fast.append(hashed_counts(texts, "char_wb", (2, 4), 1000))
    for f, s in zip(fast, slow, strict=True):
        assert [f.indptr.tolist(), f.indices.tolist(), f.data.tolist()] == s


def test_murmur_refuses_what_scikit_learn_refuses() -> None:
    with pytest.raises(ValueError, match="n_features"):
        murmur_counts(TEXTS, "word", (1, 2), 2**31)
    with pytest.raises(UnicodeEncodeError):  # a lone surrogate has no UTF-8 bytes to hash
        murmur_counts(["ok \ud800x"], "char_wb", (2, 4), 1000)


def test_the_featurizer_is_unchanged_by_the_compiled_hasher(monkeypatch: pytest.MonkeyPatch) -> None:
    """NgramFeaturizer counts with murmur_counts; with scikit-learn's HashingVectorizer in its place (the old
    path) its TF-IDF matrix is the same, bit for bit."""
    import aflite.features.ngram_hash as nh
    from aflite.features.ngram import NgramFeaturizer

    texts = _snli_texts()
    a, b = texts[: len(texts) // 2], texts[len(texts) // 2:]
    fast = NgramFeaturizer(dense=False, n_features=2**18).fit_transform(a, b)

    def old(texts: list[str], analyzer: str, ngram_range: tuple[int, int], n_features: int,
            threads: int = 1) -> sp.csr_matrix:
        from sklearn.feature_extraction.text import HashingVectorizer

        return sp.csr_matrix(HashingVectorizer(analyzer=analyzer, ngram_range=ngram_range, n_features=n_features,
                                               alternate_sign=False, norm=None, dtype=np.float32).transform(texts))

    monkeypatch.setattr(nh, "murmur_counts", old)
    slow = NgramFeaturizer(dense=False, n_features=2**18).fit_transform(a, b)
    assert fast.shape == slow.shape and fast.nnz == slow.nnz > 0
    for name in ("indptr", "indices", "data"):
        assert np.array_equal(getattr(fast, name), getattr(slow, name)), name
