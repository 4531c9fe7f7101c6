"""Work on more than one process or machine, below both Φ and the filter: a Dask cluster (:mod:`aflite.cluster.dask`:
:class:`~aflite.cluster.dask.Cluster`, a local one or a scheduler's, with a shared scratch folder) and Φ cut into
shards that workers embed (:mod:`aflite.cluster.shards`). The ensemble's blocks run there through
:class:`aflite.core.backends.dask.DaskExecutor`; featurize's chunks through
:class:`aflite.features.shards.ShardedTransform`. Dask is imported only when a cluster is opened."""
