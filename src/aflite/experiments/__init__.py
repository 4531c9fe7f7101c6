"""Experiments: the paper's synthetic experiment (synthetic) and the speed and scale benchmark (bench)."""
