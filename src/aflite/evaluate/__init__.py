"""Re-estimating what models can do on a dataset and on its filtered versions (Le Bras et al. 2020, §4.1–4.2).

The paper's evidence that AFLite removes artifacts is that models trained and tested on D(Φ) score much lower
than on D while a random subset of D of the same size barely moves (Table 3), that partial-input baselines fall
toward chance, that one filtering phase with one model (the "single-iteration" baseline) removes less, and that
models trained on D(Φ) generalise at least as well out of distribution (Table 1, HANS).

:func:`compare_runs` (and :func:`aflite.commands.evaluate.evaluate`, which writes the folder of ``aflite evaluate``;
``aflite.evaluate_runs``) reproduces that protocol for one dataset D and one or more run directories of ``aflite run``:

- **Benchmarks.** D is split once, by premise group (``seed``, recorded as ``split_seed``), into a training part
  T and a held-out part H (``heldout``, default 20 %). Every benchmark B (D, each D(Φ), a random subset of D with
  |D(Φ)| rows per seed, and the single-iteration set of each run) trains on B ∩ T and is tested on its *own*
  held-out part B ∩ H — the filtered benchmark's own dev set, filtered by the same procedure as its training part
  because AFLite ran on T and H together (the "filter train+dev together, then split" protocol). With
  ``label_matched`` each seed also draws a random subset with D(Φ)'s label counts (the label shift without the
  filter's choice of rows); the single-iteration set is one linear model's one ranking. Every model is
  also tested on all of H (the original, unfiltered held-out set) and on any external labelled set (HANS, SNLI
  test, ...).
- **Separate test sets** (``tests``; CLI ``--test NAME=FILE``): sets with D's labels that no run saw, e.g. SNLI
  dev / test / test_hard when D is SNLI train. Each benchmark is scored on each of them (Table 3 shape, next to
  the set's majority rate). With ``split=False`` (``--no-split``) D is not split at all: the paper's protocol.
- **Warm-up slices.** A run whose Φ was fine-tuned on a slice of D lists it in ``warmup_ids.txt``; those rows
  are left out of D, every D(Φ), the random subsets (drawn from D without them) and the single-iteration sets.
- **Models** (:class:`ModelSpec`): ``probe`` (standardized logistic regression) and ``mlp`` (one hidden layer)
  on cached features of a featurizer (``ngram`` or ``minilm``); ``ngram`` (TF-IDF word 1–2-gram logistic
  regression, no embedding); ``ppmi`` (Max-PPMI); ``finetune`` (a local Hugging Face encoder with a linear head,
  appendix A.6 recipe). Each takes a view: ``pair``, ``hypothesis`` (the second text column) or ``premise``
  (the first) — the partial-input variants.
- **Out of distribution.** Predictions are mapped into the external set's label space (HANS: neutral and
  contradiction become non-entailment) and reported overall, per gold label and per group (HANS: heuristic).

Trained models and their predictions are cached under ``cache_dir`` (keyed by model, options, training rows and
seed) and reused by later calls; everything random flows from the seeds.

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
