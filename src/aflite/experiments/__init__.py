"""Experiments: the paper's synthetic experiment (synthetic); the speed and scale benchmarks live in
benchmarks/aflitebench, out of the package."""
