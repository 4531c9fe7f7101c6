"""aflite: find, measure and remove dataset artifacts.

The core is :class:`aflite.filter.AFLite` (Algorithm 1 of Le Bras et al., 2020, "Adversarial Filters of
Dataset Biases"), which filters a dataset given frozen features Φ(x) and labels.
"""

from __future__ import annotations

__version__ = "0.1.0"
