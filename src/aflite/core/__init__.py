"""The filter core: Algorithm 1 (:mod:`~aflite.core.filter`'s ``AFLite``, one phase in :mod:`~aflite.core.phase`,
the first phase's data map in :mod:`~aflite.core.heldout`), the ensemble of linear models and its solver
(:mod:`~aflite.core.ensemble`, :mod:`~aflite.core.solver`, :mod:`~aflite.core.store`, :mod:`~aflite.core.blocks`,
:mod:`~aflite.core.lbfgs`, :mod:`~aflite.core.kernels`) and where it runs (:mod:`aflite.core.backends`)."""
