"""The compiled n-gram hasher the probe counts with (issue #57): the n-grams counted are exactly scikit-learn's
analyzers' (word 1-2 with the default token pattern, char_wb 2-4), hashed by the documented hash; the output does
not depend on the thread count."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from aflite.features.ngram_hash import hashed_counts, hashed_parts

TEXTS = ["Hello, World!  a b  cd", "", "x", "Ünïcode ß straße naïve café_1", "  lead trail  ",
         "a\u00a0bc\u2003de", "𝔘nicode 😀 ok", "A man is playing a guitar on stage.", "The the THE the."] * 3


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
