"""Filtering on a local Dask cluster of worker processes gives exactly the single-process result."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("dask.distributed")

from test_ensemble import anisotropic  # noqa: E402

from aflite.core.backends.dask import DaskExecutor  # noqa: E402
from aflite.core.ensemble import FastLogisticEnsemble  # noqa: E402
from aflite.core.filter import AFLite  # noqa: E402


@pytest.fixture(scope="module")
def executor():
    with DaskExecutor(n_workers=2) as ex:
        yield ex


def test_local_cluster_run_is_identical_to_one_process(executor):
    X, y = anisotropic(3000, 16, 3, seed=7)
    kw = dict(n_partitions=8, train_size=0.3, slice_size=0.05, target_size=0.5, random_state=5)
    # blocks of 2 partitions: 4 tasks per phase shared by the 2 workers
    alone = AFLite(**kw, model=FastLogisticEnsemble(block_size=2)).fit(X, y)
    spread = AFLite(**kw, model=FastLogisticEnsemble(block_size=2, executor=executor)).fit(X, y)
    assert executor.n_workers == 2
    assert alone.n_iterations_ >= 2
    assert np.array_equal(alone.keep_mask_, spread.keep_mask_)
    assert np.array_equal(alone.predictability_, spread.predictability_, equal_nan=True)
    assert np.array_equal(alone.removed_at_, spread.removed_at_)


@pytest.mark.slow  # over 6 s on 2 cores (CI runs it with --run-slow)
def test_many_classes_on_the_cluster(executor):
    X, y = anisotropic(4000, 10, 20, seed=8)
    kw = dict(n_partitions=4, train_size=0.2, slice_size=0.05, target_size=0.7, random_state=2,
              max_iterations=2)
    alone = AFLite(**kw, model=FastLogisticEnsemble(block_size=1)).fit(X, y)
    spread = AFLite(**kw, model=FastLogisticEnsemble(block_size=1, executor=executor)).fit(X, y)
    assert np.array_equal(alone.keep_mask_, spread.keep_mask_)
    assert np.array_equal(alone.predictability_, spread.predictability_, equal_nan=True)


def test_scratch_files_are_removed(tmp_path):
    X, y = anisotropic(500, 4, 2, seed=9)
    with DaskExecutor(n_workers=1, scratch=tmp_path) as ex:
        AFLite(n_partitions=4, train_size=0.3, slice_size=0.05, target_size=0.6, executor=ex,
               max_iterations=1).fit(X, y)
        assert any(tmp_path.iterdir())
    assert not any(tmp_path.iterdir())
