"""Re-estimating what models can do on a dataset and on its filtered versions (Le Bras et al. 2020, §4.1–4.2).

The paper's evidence that AFLite removes artifacts: models trained and tested on D(Φ) score much lower than on D
while a same-size random subset of D barely moves (Table 3), partial-input baselines fall toward chance, one
filtering phase with one model (the "single-iteration" baseline) removes less, and models trained on D(Φ)
generalise at least as well out of distribution (Table 1, HANS). :func:`compare_runs` (and
:func:`aflite.commands.evaluate.evaluate`, which writes the folder of ``aflite evaluate``) reproduces that protocol
for one dataset D and one or more runs of ``aflite run``: every benchmark (D, each D(Φ), random and label-matched
subsets, single-iteration sets) trains on its rows of D's training part and is tested on its own held-out part
(AFLite filtered train and dev together, then split), on all of D's held-out part, on separate test sets and on
external sets (predictions mapped into their label space: HANS's non-entailment). A run's warm-up rows are left
out of every set; models (:class:`ModelSpec`: probe, mlp, ngram, ppmi, finetune, each on a view) and their
predictions are cached under ``cache_dir``; everything random flows from the seeds.

The modules: :mod:`~aflite.evaluate.runner` (:func:`compare_runs`), :mod:`~aflite.evaluate.models`,
:mod:`~aflite.evaluate.sets` (benchmarks and external sets), :mod:`~aflite.evaluate.tables` (aggregates,
tables, plot) and :mod:`~aflite.evaluate.probe` (partial-input probes). Every public name is importable from
``aflite.evaluate``.
"""

from __future__ import annotations

from aflite.evaluate.models import FEATURE_MODELS, MODEL_KINDS, FinetuneOptions, ModelSpec, probe_featurizers
from aflite.evaluate.probe import ProbeResult, compare_partial_input, probe_skip_reason, text_probe_accuracy
from aflite.evaluate.runner import compare_runs
from aflite.evaluate.sets import HANS_PRED_MAP, EvalSet, TrainingSet, load_eval_set, load_hans, single_iteration_rows
from aflite.evaluate.tables import CHANCE_ROW, EvaluateResult, plot_report, render_tables

__all__ = [
    "CHANCE_ROW",
    "EvalSet",
    "EvaluateResult",
    "FEATURE_MODELS",
    "FinetuneOptions",
    "HANS_PRED_MAP",
    "MODEL_KINDS",
    "ModelSpec",
    "probe_featurizers",
    "ProbeResult",
    "TrainingSet",
    "compare_partial_input",
    "probe_skip_reason",
    "compare_runs",
    "load_eval_set",
    "load_hans",
    "plot_report",
    "render_tables",
    "single_iteration_rows",
    "text_probe_accuracy",
]
