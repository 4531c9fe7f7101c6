"""The benchmark harness (issue #58: out of the installed package): the fast path against scikit-learn, the
complete SNLI-sized filter, the scale benchmark, the encoder backends and the device benchmark, each a module here;
``python benchmarks/bench.py --help`` (or ``python -m aflitebench`` with ``benchmarks/`` on the path) runs them."""
