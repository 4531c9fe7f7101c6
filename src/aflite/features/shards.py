"""Φ's chunks on a cluster: :class:`ShardedTransform`, the ``shards=`` hook of :func:`aflite.features.featurize`
(the chunk loop run as shards by :func:`aflite.cluster.shards.run_shards`), and :func:`check_shardable`, which asks
the registry whether a featurizer has chunks to shard."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from aflite.cluster.shards import ShardReport, concat_shards, run_shards
from aflite.errors import ParameterError
from aflite.features.registry import REGISTRY, spec

__all__ = ["ShardedTransform", "check_shardable"]


def check_shardable(featurizer: str) -> None:
    """Refuse ``--cluster`` for a featurizer that cannot be cut into shards (its registry entry has no shards), in
    one line that says why."""
    found = spec(featurizer)
    if not found.shards:
        sharded = [s.name for s in REGISTRY.values() if s.shards]
        raise ParameterError(f"--cluster shards the encoders ({', '.join(sharded)}); --featurizer "
                             f"{featurizer} {found.no_shards}: run it without --cluster")


class ShardedTransform:
    """The chunk loop of :func:`aflite.features.featurize` (its ``shards=`` hook) run on a Dask cluster: the
    chunks become shards under ``<cache>/<stem>.parts/shards<chunk_size>/``, removed with the other parts once
    the whole matrix is cached. ``report`` holds the last run's :class:`aflite.cluster.shards.ShardReport`."""

    def __init__(self, executor: Any) -> None:
        self.executor = executor
        self.report: ShardReport | None = None

    def __call__(self, feat: Any, a: list[str], b: list[str] | None, cache: Path | None, stem: str,
                 chunk_size: int, show_progress: bool) -> np.ndarray:
        if cache is None:
            raise ParameterError("features on a cluster need a cache folder every worker can write (cache_dir)")
        unit = "image" if getattr(feat, "reads_images", False) else "pair"
        paths, self.report = run_shards(self.executor, feat, a, b, cache / f"{stem}.parts" / f"shards{chunk_size}",
                                        stem, chunk_size, show_progress=show_progress, unit=unit)
        return concat_shards(paths)
