"""Where the ensemble runs besides numpy/numba: PyTorch on a GPU (:mod:`~aflite.core.backends.torch`) and a Dask
cluster (:mod:`~aflite.core.backends.dask`, ``DaskExecutor``)."""
