"""The cheaper randomized SVD computes scikit-learn's TruncatedSVD(algorithm="randomized") function."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.decomposition import TruncatedSVD

from aflite.features.rsvd import DEDUP_BELOW, SYRK_ROWS, _distinct_rows, _gram64, randomized_components
from aflite.features.spmm import BLOCK, column_blocks, csr_dense, csr_t_dense


def _matrix(shape: tuple[int, int], dtype: type) -> sp.csr_matrix:
    x = sp.random(*shape, density=0.01, random_state=1, format="csr", dtype=np.float64)
    x.data = np.random.default_rng(0).random(len(x.data))
    return sp.csr_matrix(x, dtype=dtype)


@pytest.mark.parametrize("shape", [(600, 1000), (1000, 400)])  # transposed and not (scikit-learn's "auto")
def test_float64_equals_sklearn(shape: tuple[int, int]) -> None:
    # in float64 both are exact to ~1e-13: the same random start, subspace, signs and order
    x = _matrix(shape, np.float64)
    ref = TruncatedSVD(30, algorithm="randomized", n_iter=5, random_state=3).fit(x).components_
    got = randomized_components(x, 30, seed=3)
    assert got.dtype == np.float64 and got.shape == ref.shape
    assert np.abs(got - ref).max() < 1e-9


@pytest.mark.parametrize("shape", [(600, 1000), (1000, 400)])
def test_float32_within_sklearns_own_rounding(shape: tuple[int, int]) -> None:
    # tolerance: scikit-learn's float32 result differs from its float64 one by its own rounding; ours must be
    # at least as close to the float64 answer, and agree with scikit-learn's float32 transform to that spread
    x32 = _matrix(shape, np.float32)
    exact = TruncatedSVD(30, algorithm="randomized", n_iter=5, random_state=3).fit(x32.astype(np.float64))
    sk32 = TruncatedSVD(30, algorithm="randomized", n_iter=5, random_state=3).fit(x32)
    got = randomized_components(x32, 30, seed=3, threads=2)
    assert got.dtype == np.float32
    spread = np.abs(sk32.components_ - exact.components_).max()
    assert np.abs(got - exact.components_).max() <= spread
    sk_err = np.abs(exact.transform(x32) - sk32.transform(x32)).max()
    assert np.abs(x32 @ got.T - sk32.transform(x32)).max() <= 2 * sk_err


def test_seed_changes_the_start() -> None:
    x = _matrix((600, 1000), np.float64)
    a, b = randomized_components(x, 30, seed=0), randomized_components(x, 30, seed=1)
    assert not np.allclose(a, b)  # a different random start gives a different approximation of the small modes


def test_csr_dense_threads_do_not_change_the_result() -> None:
    x = _matrix((500, 300), np.float32)
    d = np.random.default_rng(2).standard_normal((300, 7)).astype(np.float32)
    one, two = csr_dense(x, d, 1), csr_dense(x, d, 2)
    assert np.array_equal(one, two) and two.dtype == np.float32  # bit-equal: each row summed in one order
    np.testing.assert_allclose(two, x @ d, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_csr_t_dense_is_the_gather_over_the_transpose_bit_for_bit(dtype: type) -> None:
    x = _matrix((400, 900), dtype)
    x.data[::7] *= -3.0
    d = np.random.default_rng(3).standard_normal((400, 70)).astype(dtype)  # 70 columns: several column blocks
    want = csr_dense(sp.csr_matrix(x.T), d, 1)
    for threads in (1, 2, 3):
        got = csr_t_dense(x, d, threads)
        assert got.dtype == dtype and got.shape == (900, 70)
        assert np.array_equal(got, want)  # each element summed over x's rows in ascending order, whatever the split
    np.testing.assert_allclose(want, x.T @ d, rtol=1e-5, atol=1e-6)


def test_column_blocks_cover_the_columns_evenly() -> None:
    for columns, threads in [(266, 2), (266, 1), (5, 8), (1, 1), (130, 3)]:
        bounds = column_blocks(columns, threads)
        widths = np.diff(bounds)
        assert bounds[0] == 0 and bounds[-1] == columns and (widths >= 1).all() and widths.max() <= BLOCK
        assert len(widths) % threads == 0 or len(widths) == columns


def test_power_iterates_float32_gram_is_the_float64_one_to_float32_rounding() -> None:
    y = np.random.default_rng(4).standard_normal((3 * SYRK_ROWS + 5, 40)).astype(np.float32)
    exact, fast = _gram64(y), _gram64(y, exact=False)
    assert fast.dtype == np.float64 and np.array_equal(fast, fast.T)
    np.testing.assert_allclose(fast, exact, rtol=0, atol=1e-5 * np.abs(exact).max())


def _repeating(shape: tuple[int, int], dtype: type, copies: int = 3) -> sp.csr_matrix:
    """A matrix whose rows are ``copies`` shuffled copies of a random one's (an NLI field repeating its premises)."""
    base = _matrix(shape, dtype)
    order = np.random.default_rng(5).permutation(copies * shape[0]) % shape[0]
    return sp.csr_matrix(base[order])


def test_distinct_rows_rebuild_the_matrix() -> None:
    x = _repeating((200, 500), np.float32)
    r = int(np.flatnonzero(np.diff(x.indptr))[0])
    x.data[x.indptr[r]:x.indptr[r + 1]] *= 2  # a scaled copy is another row, not a repeat
    u, inverse = _distinct_rows(x)
    distinct = {(tuple(x[i].indices), tuple(x[i].data)) for i in range(x.shape[0])}
    assert u.shape == (len(distinct), 500) and inverse.shape == (600,) and len(distinct) < 210
    assert (u[inverse] != x).nnz == 0  # x = P u exactly
    assert len({(tuple(u[i].indices), tuple(u[i].data)) for i in range(u.shape[0])}) == len(distinct)
    assert u.nnz <= DEDUP_BELOW * x.nnz  # the test below takes the distinct-rows route


@pytest.mark.parametrize("shape", [(300, 1000), (500, 400)])  # 900 x 1000 transposed, 1500 x 400 not
def test_repeated_rows_route_is_sklearns_function(shape: tuple[int, int]) -> None:
    # products through the distinct rows are the same maths: float64 agrees with scikit-learn to ~1e-13
    x = _repeating(shape, np.float64)
    ref = TruncatedSVD(30, algorithm="randomized", n_iter=5, random_state=3).fit(x).components_
    got = randomized_components(x, 30, seed=3, threads=2)
    assert np.abs(got - ref).max() < 1e-9
    # float32: within scikit-learn's own float32 rounding of the float64 answer
    x32 = sp.csr_matrix(x, dtype=np.float32)
    sk32 = TruncatedSVD(30, algorithm="randomized", n_iter=5, random_state=3).fit(x32).components_
    got32 = randomized_components(x32, 30, seed=3, threads=2)
    assert got32.dtype == np.float32
    assert np.abs(got32 - ref).max() <= np.abs(sk32 - ref).max()
