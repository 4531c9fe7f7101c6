"""A combined Φ: several featurizers' matrices side by side (``--featurizer warmup+ngram``).

The paper's method allows any Φ; AFLite's linear models can only find the cues that Φ makes linear. A fine-tuned
encoder and hashed n-grams see different cues (a sentence's meaning vs its exact words), so joining them makes a
stronger adversary than either alone, at the cost of computing both. Each part is computed by
:func:`aflite.features.featurize` exactly as it would be alone (so a part a previous run computed is read from the
same cache), restricted to the rows left after the warm-up slice of the part that trains on one, and scaled so that
its rows' root-mean-square norm is 1: every part then weighs the same under the ensemble's L2 penalty, whatever
its dimension or scale (MiniLM's rows are unit vectors, a fine-tuned encoder's are not).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from aflite.errors import ParameterError
from aflite.features.base import BaseFeaturizer, Computes, Facts, FeatureJob, Matrix, Options, PartInfo, PhiInfo, Plain
from aflite.features.compute import featurize, make_featurizer
from aflite.features.registry import COMBINE, run_options, spec

__all__ = ["CombinedFeaturizer", "scale_to_unit_rms"]


def scale_to_unit_rms(x: Matrix) -> tuple[np.ndarray, float]:
    """``x`` (dense float32) divided by the root-mean-square of its row norms, and that divisor (1 for all zeros)."""
    dense = np.asarray(sp.csr_matrix(x).toarray() if sp.issparse(x) else x, dtype=np.float32)
    rms = float(np.sqrt(np.mean(np.einsum("ij,ij->i", dense, dense, dtype=np.float64)))) if dense.size else 0.0
    scale = rms if rms > 0 else 1.0
    return np.ascontiguousarray(dense / np.float32(scale)), scale


class CombinedFeaturizer(BaseFeaturizer):
    """Φ = [Φ_1 | Φ_2 | ...], each part scaled to unit RMS row norm.

    ``parts`` are registered featurizer names (text); ``options`` are the command's featurizer options, each routed
    to the parts that take it (``model_path`` and ``lr`` to a warm-up, ...); ``part_options`` sets a part's options
    outright (what :meth:`get_options` records, so that explain and evaluate rebuild the same Φ). Used through
    :func:`aflite.features.featurize`, which supplies the labels and the warm-up slice; ``fit_transform`` on its own
    runs the parts without a cache (and refuses a part that needs a warm-up slice: featurize draws it).
    """

    name = "combined"

    def __init__(self, parts: Sequence[str] = (), part_options: dict[str, Options] | None = None,
                 show_progress: bool = True, **options: Any) -> None:
        self.parts = tuple(parts)
        self.part_options = {k: dict(v) for k, v in (part_options or {}).items()}
        self.show_progress = show_progress
        self.options = options
        self.name = COMBINE.join(self.parts)
        self._plan: tuple[int | float, int | None] | None = None
        self._built: dict[str, Computes] | None = None

    def _validate(self) -> None:
        if len(self.parts) < 2:
            raise ParameterError(f"a combined featurizer needs two or more parts, got {list(self.parts)}")
        spec(self.name)  # the parts exist, can be combined, none twice
        unknown = set(self.part_options) - set(self.parts)
        if unknown:
            raise ParameterError(f"part_options names featurizers that are not parts: {', '.join(sorted(unknown))}")
        taken = {o for p in self.parts for o in spec(p).options}
        stray = set(self.options) - taken
        if stray:
            raise ParameterError(f"featurizer {self.name!r} takes no option {', '.join(sorted(stray))}")
        self._featurizers()  # each part checks its own options (make_featurizer) before any work

    def _options_of(self, part: str) -> dict[str, Any]:
        """The options ``part`` is built with: its recorded ones, else the command's options it takes."""
        if part in self.part_options:
            return dict(self.part_options[part])
        found = spec(part)
        return {k: v for k, v in self.options.items() if found.takes(k) and v is not None}

    def _featurizers(self) -> dict[str, Computes]:
        """Each part built once, with featurize's default hooks where its class has none (as featurize runs it)."""
        if self._built is None:
            built = {p: make_featurizer(p, **self._options_of(p)) for p in self.parts}
            self._built = {p: f if isinstance(f, Computes) else Plain(f) for p, f in built.items()}
        return self._built

    def get_options(self) -> Options:
        """The parts and each part's full options (its encoder backend made explicit), as a part records them."""
        return {"parts": list(self.parts),
                "part_options": {p: run_options(p, f.get_options()) for p, f in self._featurizers().items()}}

    def plan(self, a: list[str], y: Any, warmup_size: int | float,
             warmup_seed: int | None) -> tuple[np.ndarray | None, Facts]:
        """The warm-up slice of the part that trains on one (the others leave it out too) and every part's cache
        key facts."""
        self._plan = (warmup_size, warmup_seed)
        warmup: np.ndarray | None = None
        key_facts: Facts = {}
        for p, f in self._featurizers().items():
            rows, part_facts = f.plan(a, y if spec(p).needs_labels else None, warmup_size, warmup_seed)
            key_facts[p] = part_facts
            if rows is not None:
                warmup = rows
        return warmup, key_facts

    def compute(self, job: FeatureJob, rows: np.ndarray, warmup_rows: np.ndarray | None) -> tuple[Any, PhiInfo]:
        """Each part through :func:`featurize` (its own cache entry, resumable; looked for in the call's read-only
        folders too), cut to ``rows`` and scaled."""
        assert self._plan is not None, "featurize calls plan before compute"
        warmup_size, warmup_seed = self._plan
        # the texts are already the view's: a pair stays a pair, one text is featurized as the only text
        view = "pair" if job.b is not None else "premise"
        blocks, parts_info, info = [], [], PhiInfo()
        for p in self.parts:
            needs = spec(p).needs_labels
            f = featurize(job.a, job.b, p, view, cache_dir=job.cache, y=job.y if needs else None,
                          warmup_size=warmup_size, warmup_seed=warmup_seed, chunk_size=job.chunk_size,
                          show_progress=job.show_progress, read_only=job.read_only, **self._options_of(p))
            pos = np.searchsorted(f.rows, rows)
            if np.any(pos >= len(f.rows)) or not np.array_equal(f.rows[np.minimum(pos, len(f.rows) - 1)], rows):
                raise ParameterError(f"featurizer {self.name!r}: part {p} left out rows the others keep "
                                     "(two warm-up slices?)")
            x = f.X[pos] if len(pos) != f.X.shape[0] else f.X
            block, scale = scale_to_unit_rms(x)
            blocks.append(block)
            parts_info.append(PartInfo(p, int(block.shape[1]), round(scale, 6), f.from_cache))
            if needs:
                info = f.info  # a warm-up's training record, as the run shows it for a warm-up alone
        return np.hstack(blocks).astype(np.float32, copy=False), dataclasses.replace(info, parts=parts_info)

    def transform(self, texts_a: Sequence[str], texts_b: Sequence[str] | None = None) -> np.ndarray:
        """The parts without a cache; a part that trains on a warm-up slice needs :func:`featurize`."""
        if any(spec(p).needs_labels for p in self.parts):
            raise ParameterError(f"featurizer {self.name!r} trains on a warm-up slice: use aflite.features."
                                 "featurize (it draws the slice and leaves it out)")
        blocks = []
        view = "pair" if texts_b is not None else "premise"
        for p in self.parts:
            x = featurize(texts_a, texts_b, p, view, show_progress=self.show_progress, **self._options_of(p)).X
            blocks.append(scale_to_unit_rms(x)[0])
        return np.hstack(blocks).astype(np.float32, copy=False)
