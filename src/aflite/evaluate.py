"""Re-estimating what models can do on a dataset and on its filtered versions (Le Bras et al. 2020, §4.1–4.2).

The paper's evidence that AFLite removes artifacts is that models trained and tested on D(Φ) score much lower
than on D while a random subset of D of the same size barely moves (Table 3), that partial-input baselines fall
toward chance, that one filtering phase with one model (the "single-iteration" baseline) removes less, and that
models trained on D(Φ) generalise at least as well out of distribution (Table 1, HANS).

:func:`evaluate` reproduces that protocol for one dataset D and one or more run directories of ``aflite run``:

- **Benchmarks.** D is split once, by premise group (``split_seed``), into a training part T and a held-out part
  H (``heldout``, default 20 %). Every benchmark B (D, each D(Φ), a random subset of D with |D(Φ)| rows per seed,
  and the single-iteration set of each run) trains on B ∩ T and is tested on its *own* held-out part B ∩ H — the
  filtered benchmark's own dev set, filtered by the same procedure as its training part because AFLite ran on T
  and H together (the "filter train+dev together, then split" protocol). Every model is also tested on all of H
  (the original, unfiltered held-out set) and on any external labelled set (HANS, SNLI test, ...).
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
"""

from __future__ import annotations

import json
import logging
import math
import re
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from aflite.atomic import atomic_open, write_json, write_npy, write_text
from aflite.errors import InputError, ParameterError
from aflite.hashing import data_fingerprint
from aflite.hashing import hash_parts as _hash
from aflite.splits import split_heldout
from aflite.splits import stratified_sample as _stratified_sample
from aflite.threads import limited

log = logging.getLogger(__name__)


@dataclass
class ProbeResult:
    """Cross-validated accuracy of a probe on one training set."""

    name: str
    size: int
    accuracy: float
    accuracy_std: float
    majority: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def text_probe_accuracy(
    texts: list[str], labels: NDArray[Any], folds: int = 5, random_state: int = 0
) -> tuple[float, float]:
    """k-fold accuracy of a TF-IDF (word 1–2-grams) logistic regression: a cheap partial-input baseline."""
    from sklearn.base import clone
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold
    from sklearn.pipeline import make_pipeline

    from aflite.threads import map_fits

    y = np.asarray(labels)
    _, counts = np.unique(y, return_counts=True)
    k = int(max(2, min(folds, counts.min())))
    model = make_pipeline(
        TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True), LogisticRegression(C=1.0, max_iter=2000)
    )
    cv = StratifiedKFold(n_splits=k, shuffle=True, random_state=random_state)
    X = np.asarray(texts, dtype=object)

    def fold(split: tuple[NDArray[np.intp], NDArray[np.intp]]) -> float:
        tr, te = split
        return float(clone(model).fit(X[tr], y[tr]).score(X[te], y[te]))

    # the folds side by side, one BLAS/OpenMP thread each (aflite.threads); the same scores as cross_val_score
    scores = np.asarray(map_fits(fold, list(cv.split(X, y))))
    return float(scores.mean()), float(scores.std())


@limited  # one thread policy (aflite.threads)
def compare_partial_input(
    texts: list[str],
    labels: NDArray[Any],
    keep: NDArray[np.bool_],
    folds: int = 5,
    random_state: int = 0,
    random_repeats: int = 3,
    progress: Any = None,
) -> list[ProbeResult]:
    """The probe on D, on D(Φ) (``keep``) and on random subsets of D with |D(Φ)| rows (seeded).
    ``progress`` (e.g. a tqdm bar of 2 + ``random_repeats`` steps) is updated after each training set."""
    y = np.asarray(labels)
    out = []

    def one(name: str, rows: NDArray[np.intp], seed: int) -> ProbeResult:
        yy = y[rows]
        acc, sd = text_probe_accuracy([texts[i] for i in rows], yy, folds, seed)
        maj = float(np.unique(yy, return_counts=True)[1].max() / len(yy))
        if progress is not None:
            progress.update(1)
        return ProbeResult(name, len(rows), acc, sd, maj)

    everything = np.arange(len(y))
    out.append(one("D", everything, random_state))
    kept = np.flatnonzero(keep)
    out.append(one("D(Φ)", kept, random_state))
    rng = np.random.default_rng([random_state, 7])
    accs = []
    for r in range(random_repeats):
        rows = np.sort(rng.choice(len(y), size=len(kept), replace=False))
        accs.append(one("random", rows, random_state + r))
    out.append(
        ProbeResult(
            f"random subset (mean of {random_repeats})",
            len(kept),
            float(np.mean([a.accuracy for a in accs])),
            float(np.std([a.accuracy for a in accs])),
            float(np.mean([a.majority for a in accs])),
        )
    )
    return out


# ==========================================================================================================
# aflite evaluate
# ==========================================================================================================

MODEL_KINDS = ("probe", "mlp", "ngram", "ppmi", "finetune")
FEATURE_MODELS = ("probe", "mlp")
PROBE_FEATURIZERS = ("ngram", "minilm", "efficientnet-lite0", "hf-image")  # the last two: image datasets
VIEWS = ("pair", "hypothesis", "premise")
DEFAULT_MODELS = ("probe:minilm:pair", "mlp:minilm:pair", "ngram:pair", "ngram:hypothesis", "ppmi:pair")
HANS_PRED_MAP = {"entailment": "entailment", "neutral": "non-entailment", "contradiction": "non-entailment"}
_CACHE_FORMAT = 1


@dataclass(frozen=True)
class ModelSpec:
    """One model to train on every training set: ``kind`` (see MODEL_KINDS), ``view``, and for ``probe`` /
    ``mlp`` the ``featurizer`` whose cached features it reads. Written ``kind[:featurizer][:view]``, e.g.
    ``probe:minilm:pair``, ``mlp:ngram:hypothesis``, ``ngram:hypothesis``, ``ppmi:pair``, ``finetune:pair``."""

    kind: str
    view: str = "pair"
    featurizer: str | None = None

    @classmethod
    def parse(cls, text: str | ModelSpec) -> ModelSpec:
        if isinstance(text, ModelSpec):
            return text
        parts = [p.strip() for p in str(text).split(":") if p.strip()]
        if not parts or parts[0] not in MODEL_KINDS:
            raise ParameterError(f"model {text!r}: the kind must be one of {', '.join(MODEL_KINDS)}")
        kind, rest = parts[0], parts[1:]
        feat = None
        if kind in FEATURE_MODELS:
            if not rest or rest[0] not in PROBE_FEATURIZERS:
                raise ParameterError(f"model {text!r}: {kind} needs a featurizer ({', '.join(PROBE_FEATURIZERS)}), "
                                     f"e.g. {kind}:minilm:pair")
            feat, rest = rest[0], rest[1:]
        view = rest[0] if rest else "pair"
        if len(rest) > 1 or view not in VIEWS:
            raise ParameterError(f"model {text!r}: the view must be one of {', '.join(VIEWS)}")
        return cls(kind, view, feat)

    @property
    def key(self) -> str:
        return ":".join(x for x in (self.kind, self.featurizer, self.view) if x)

    @property
    def label(self) -> str:
        base = {
            "probe": f"Linear probe ({self.featurizer})",
            "mlp": f"MLP ({self.featurizer})",
            "ngram": "n-gram LR",
            "ppmi": "Max-PPMI",
            "finetune": "Fine-tuned encoder",
        }[self.kind]
        suffix = {"pair": "", "hypothesis": " -HypOnly", "premise": " -PremOnly"}[self.view]
        return base + suffix

    @property
    def stochastic(self) -> bool:
        """Whether training depends on the seed (deterministic models train once per fixed training set)."""
        return self.kind in ("mlp", "finetune")


@dataclass
class FinetuneOptions:
    """Fine-tuning recipe. Defaults: appendix A.6 (Adam, lr 1e-5, eps 1e-8, 3 epochs, batch 92; the HF GLUE
    script's max length 128 and linearly decaying learning rate). ``max_train`` caps the training rows (a
    seeded sample); when None, a CPU run uses ``cpu_max_train`` and a GPU run uses everything. ``eval_max``
    likewise caps each external set (a fixed stratified sample) on a CPU."""

    model_path: str | None = None
    lr: float = 1e-5
    epochs: int = 3
    batch_size: int = 92
    eps: float = 1e-8
    max_length: int = 128
    max_train: int | None = None
    cpu_max_train: int | None = 2000
    eval_max: int | None = None
    cpu_eval_max: int | None = 3000
    max_steps: int | None = None
    device: str | None = None
    num_threads: int | None = None
    # image datasets: the network to fine-tune (efficientnet-lite0, or hf-image at model_path) and its input size
    image_model: str | None = None
    image_size: int = 224

    def check(self) -> None:
        if not self.lr > 0 or not self.eps > 0:
            raise ParameterError("fine-tuning lr and eps must be > 0")
        if self.epochs < 1 or self.batch_size < 1 or self.max_length < 8:
            raise ParameterError("fine-tuning needs epochs >= 1, batch_size >= 1 and max_length >= 8")
        for name in ("max_train", "cpu_max_train", "eval_max", "cpu_eval_max", "max_steps"):
            v = getattr(self, name)
            if v is not None and v < 1:
                raise ParameterError(f"fine-tuning {name} must be >= 1 (or unset), got {v}")


@dataclass
class EvalSet:
    """A labelled evaluation set outside D. ``pred_map`` turns a model's predicted label into this set's label
    space (unmapped labels stay as they are); ``groups`` (optional) breaks accuracy down, e.g. HANS heuristics."""

    name: str
    texts_a: list[str]
    texts_b: list[str] | None
    labels: NDArray[Any]
    groups: NDArray[Any] | None = None
    pred_map: dict[str, str] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.texts_a)


def load_eval_set(
    paths: str | Path | Sequence[str | Path],
    name: str | None = None,
    *,
    label_map: dict[str, str] | None = None,
    pred_map: dict[str, str] | None = None,
    group_column: str | None = None,
    dataset_options: dict[str, Any] | None = None,
    max_rows: int | None = None,
    sample_seed: int = 0,
) -> EvalSet:
    """Load one labelled evaluation set from one or more files (any format :func:`aflite.data.load_dataset`
    reads). ``label_map`` renames gold labels (e.g. ``{"0": "entailment"}``); files of one set must end up with
    the same label set. ``max_rows`` keeps a seeded sample stratified by group and label (for slow machines)."""
    from aflite.data import load_dataset

    plist = [Path(paths)] if isinstance(paths, str | Path) else [Path(p) for p in paths]
    if not plist:
        raise ParameterError("an evaluation set needs at least one file")
    a: list[str] = []
    b: list[str] | None = []
    labels: list[str] = []
    groups: list[str] = []
    label_sets: list[tuple[Path, set[str]]] = []
    raw_seen: set[str] = set()
    for p in plist:
        from aflite import images

        # an image folder is an OOD image set (e.g. the cue-flipped test set of a coloured-MNIST experiment)
        ds = images.load_image_dataset(p) if images.is_image_folder(p) else load_dataset(p, **(dataset_options or {}))
        labs = [str(x) for x in ds.labels.tolist()]
        raw_seen.update(labs)
        if label_map:
            labs = [label_map.get(x, x) for x in labs]
        label_sets.append((p, set(labs)))
        a += ds.texts_a
        if b is not None and ds.texts_b is not None:
            b += ds.texts_b
        else:
            b = None
        labels += labs
        if group_column is not None:
            if group_column not in ds.extra:
                raise InputError(f"{p}: no column {group_column!r} to group by (columns: {sorted(ds.extra)})")
            groups += [str(g) for g in ds.extra[group_column]]
    unmatched = sorted(set(label_map or {}) - raw_seen)
    if unmatched:
        where = ", ".join(str(p) for p in plist)
        raise InputError(f"{where}: label map entr{'y' if len(unmatched) == 1 else 'ies'} "
                         f"{', '.join(f'{k}={(label_map or {})[k]}' for k in unmatched)} match no label of "
                         f"{name or plist[0].name}; its labels are {sorted(raw_seen)}")
    first_path, first = label_sets[0]
    for p, other in label_sets[1:]:
        if other != first:
            raise InputError(f"evaluation files of one set have different label sets: {first_path} has "
                             f"{sorted(first)}, {p} has {sorted(other)}")
    es = EvalSet(name or plist[0].name.split(".")[0], a, b, np.asarray(labels, dtype=object).astype(str),
                 np.asarray(groups).astype(str) if group_column is not None else None,
                 dict(pred_map or {}), [str(p) for p in plist])
    if max_rows is not None:
        if max_rows < 1:
            raise ParameterError(f"max_rows must be >= 1, got {max_rows}")
        rows = _stratified_sample(es.labels, es.groups, max_rows, sample_seed)
        es = EvalSet(es.name, [es.texts_a[i] for i in rows], None if es.texts_b is None else
                     [es.texts_b[i] for i in rows], es.labels[rows], None if es.groups is None else es.groups[rows],
                     es.pred_map, es.sources + [f"stratified sample of {len(rows)} rows, seed {sample_seed}"])
    return es


def load_hans(path: str | Path, name: str = "HANS", max_rows: int | None = None) -> EvalSet:
    """HANS (McCoy et al. 2019): neutral and contradiction predictions count as non-entailment; accuracy is
    broken down by heuristic (lexical_overlap, subsequence, constituent)."""
    return load_eval_set(path, name, pred_map=HANS_PRED_MAP, group_column="heuristic", max_rows=max_rows)


# ---------------------------------------------------------------------------------------------- corpora


@dataclass
class _Corpus:
    name: str
    texts_a: list[str]
    texts_b: list[str] | None
    fingerprint: str

    def view(self, view: str, rows: NDArray[np.intp]) -> tuple[list[str], list[str] | None]:
        if view == "hypothesis" and self.texts_b is None:
            raise ParameterError(f"{self.name}: view 'hypothesis' needs a second text column")
        a = [self.texts_a[i] for i in rows]
        b = None if self.texts_b is None else [self.texts_b[i] for i in rows]
        if view == "premise":
            return a, None
        if view == "hypothesis":
            assert b is not None
            return b, None
        return a, b


def _corpus(name: str, a: list[str], b: list[str] | None) -> _Corpus:
    return _Corpus(name, a, b, data_fingerprint(a, b))


class _FeatureStore:
    """Cached features per (featurizer, view, corpus). ngram is fitted on D (texts only) and applied to the rest."""

    def __init__(self, d: _Corpus, cache: Path, show_progress: bool, minilm_options: dict[str, Any]) -> None:
        self.d = d
        self.cache = cache
        self.show_progress = show_progress
        self.minilm_options = minilm_options
        self.image_options: dict[str, Any] = {}
        self._memo: dict[tuple[str, str, str], NDArray[np.float32]] = {}
        self._ngram: dict[str, Any] = {}

    def get(self, featurizer: str, view: str, corpus: _Corpus) -> NDArray[np.float32]:
        k = (featurizer, view, corpus.fingerprint)
        if k in self._memo:
            return self._memo[k]
        every = np.arange(len(corpus.texts_a))
        a, b = corpus.view(view, every)
        if featurizer in ("efficientnet-lite0", "hf-image"):  # image references; options as the run used them
            from aflite.features import featurize

            x = np.asarray(featurize(a, None, featurizer, cache_dir=self.cache, show_progress=self.show_progress,
                                     **self.image_options).X, dtype=np.float32)
        elif featurizer == "minilm":
            from aflite.features import featurize

            # the cache folder's top level, as `aflite run` and `aflite audit` lay it out, so that a run's cache
            # folder given as the cache reuses the run's MiniLM matrices instead of embedding D again
            x = np.asarray(featurize(a, b, "minilm", "pair", cache_dir=self.cache,
                                     show_progress=self.show_progress, **self.minilm_options).X, dtype=np.float32)
        else:
            path = self.cache / "features" / f"evalngram-{view}-{self.d.fingerprint[:16]}-{corpus.fingerprint[:16]}.npy"
            if path.is_file():
                x = np.load(path, allow_pickle=False)
            else:
                feat = self._ngram.get(view)
                if feat is None:
                    from aflite.features import NgramFeaturizer

                    feat = NgramFeaturizer()
                    da, db = self.d.view(view, np.arange(len(self.d.texts_a)))
                    feat.fit(da, db)
                    self._ngram[view] = feat
                x = np.asarray(feat.transform(a, b), dtype=np.float32)
                write_npy(path, x)
        self._memo[k] = x
        return x


# ---------------------------------------------------------------------------------------------- models


def _tokens(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


class _MaxPPMI:
    """Max-PPMI: PMI(w, y) = log p̂(y | w) / p(y) with p̂(y | w) = (c(w, y) + α) / (c(w) + α·K) over instance
    (document) counts; words seen in fewer than ``min_count`` training instances are ignored. An instance gets
    the label with the highest positive PMI among its words; with no positive PMI, the most frequent label.
    For pairs, premise and hypothesis words are kept apart (``p:`` / ``h:``)."""

    def __init__(self, alpha: float = 1.0, min_count: int = 3) -> None:
        self.alpha = alpha
        self.min_count = min_count

    @staticmethod
    def _words(a: list[str], b: list[str] | None) -> list[set[str]]:
        if b is None:
            return [set(_tokens(t)) for t in a]
        return [{"p:" + w for w in _tokens(x)} | {"h:" + w for w in _tokens(y)} for x, y in zip(a, b, strict=True)]

    def fit(self, a: list[str], b: list[str] | None, y: NDArray[np.int64], n_classes: int) -> _MaxPPMI:
        counts: dict[str, NDArray[np.float64]] = {}
        for ws, lab in zip(self._words(a, b), y, strict=True):
            for w in ws:
                c = counts.get(w)
                if c is None:
                    c = counts[w] = np.zeros(n_classes)
                c[lab] += 1
        prior = np.bincount(y, minlength=n_classes) / len(y)
        self.order_ = np.argsort(-prior, kind="stable")
        self.majority_ = int(self.order_[0])
        self.ppmi_: dict[str, NDArray[np.float64]] = {}
        for w, c in counts.items():
            tot = c.sum()
            if tot < self.min_count:
                continue
            p = (c + self.alpha) / (tot + self.alpha * n_classes)
            with np.errstate(divide="ignore"):
                pmi = np.log(p / np.maximum(prior, 1e-12))
            self.ppmi_[w] = np.maximum(pmi, 0.0)
        self.n_classes_ = n_classes
        return self

    def predict(self, a: list[str], b: list[str] | None) -> NDArray[np.int64]:
        out = np.empty(len(a), dtype=np.int64)
        zero = np.zeros(self.n_classes_)
        for i, ws in enumerate(self._words(a, b)):
            best = zero.copy()
            for w in ws:
                v = self.ppmi_.get(w)
                if v is not None:
                    np.maximum(best, v, out=best)
            if best.max() <= 0:
                out[i] = self.majority_
            else:  # ties go to the more frequent label
                out[i] = int(self.order_[np.argmax(best[self.order_])])
        return out


class _NgramLR:
    """TF-IDF word 1–2-gram logistic regression; for pairs, premise and hypothesis get separate vocabularies."""

    def fit(self, a: list[str], b: list[str] | None, y: NDArray[np.int64], n_classes: int) -> _NgramLR:
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.linear_model import LogisticRegression

        self.vecs_ = [TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True)
                      for _ in range(1 + (b is not None))]
        X = self._x(a, b, fit=True)
        self.clf_ = LogisticRegression(C=1.0, max_iter=2000).fit(X, y)
        return self

    def _x(self, a: list[str], b: list[str] | None, fit: bool = False) -> Any:
        import scipy.sparse as sp

        fields = [a] if b is None else [a, b]
        mats = [v.fit_transform(f) if fit else v.transform(f) for v, f in zip(self.vecs_, fields, strict=True)]
        return mats[0] if len(mats) == 1 else sp.hstack(mats, format="csr")

    def predict(self, a: list[str], b: list[str] | None) -> NDArray[np.int64]:
        return np.asarray(self.clf_.predict(self._x(a, b)), dtype=np.int64)


def _feature_classifier(kind: str, seed: int) -> Any:
    from sklearn.linear_model import LogisticRegression
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    if kind == "probe":
        return make_pipeline(StandardScaler(), LogisticRegression(C=1.0, max_iter=3000))
    return make_pipeline(StandardScaler(), MLPClassifier(hidden_layer_sizes=(256,), alpha=1e-3, early_stopping=True,
                                                         max_iter=200, random_state=seed))


class _FineTuned:
    """A pretrained encoder + dropout + linear head on the mean-pooled last hidden state, trained end to end by
    the one trainer (:func:`aflite.training.fit_classifier`, preset ``EVALUATE`` with these options)."""

    def __init__(self, opts: FinetuneOptions, seed: int, show_progress: bool) -> None:
        from aflite.encoders import import_torch, resolve_device
        from aflite.features import _resolve_model_path

        self.opts = opts
        self.seed = seed
        self.show_progress = show_progress
        self.torch, _ = import_torch()
        if opts.num_threads is not None:
            self.torch.set_num_threads(int(opts.num_threads))
        # image networks: EfficientNet-Lite0 needs no folder; a text model defaults to the bundled MiniLM
        self.model_path = opts.model_path if opts.image_model else _resolve_model_path(opts.model_path)
        self.device = resolve_device(opts.device, self.torch)
        self.steps_ = 0
        self.final_loss_: float | None = None

    def train_config(self) -> Any:
        from aflite.training import EVALUATE

        o = self.opts
        return EVALUATE.replace(lr=o.lr, eps=o.eps, epochs=o.epochs, batch_size=o.batch_size, max_steps=o.max_steps,
                                seed=self.seed, shuffle_seed=(self.seed, 11), device=self.device)

    def _new_encoder(self) -> Any:
        from aflite.encoders import ImageEncoder, TextEncoder

        if self.opts.image_model:
            return ImageEncoder(self.opts.image_model, model_path=self.model_path, device=self.device,
                                image_size=self.opts.image_size)
        assert self.model_path is not None
        return TextEncoder(self.model_path, device=self.device)

    def _items(self, a: list[str], b: list[str] | None, max_length: int) -> list[Any]:
        if self.opts.image_model:
            return list(self.encoder.prepare(a))
        return list(self.encoder.prepare_pairs(a, b, max_length))

    def _build(self, n_classes: int) -> None:
        from aflite import training

        training.seeded(self.seed)
        self.encoder = self._new_encoder()
        self.head = training.make_head(self.torch, self.encoder.dim, n_classes, 0.1, self.device)

    def fit(self, a: list[str], b: list[str] | None, y: NDArray[np.int64], n_classes: int) -> _FineTuned:
        from aflite import training

        training.seeded(self.seed)
        self.encoder = self._new_encoder()
        items = self._items(a, b, self.opts.max_length)
        self.head, res = training.fit_classifier(self.encoder, items, y, n_classes, self.train_config(),
                                                 desc="fine-tuning", show_progress=self.show_progress)
        self.steps_, self.final_loss_ = res.steps, res.final_loss
        return self

    def predict(self, a: list[str], b: list[str] | None, batch_size: int = 128) -> NDArray[np.int64]:
        from aflite.features import DEFAULT_MAX_LENGTH
        from aflite.training import predict_classes

        return predict_classes(self.encoder, self.head, self._items(a, b, DEFAULT_MAX_LENGTH), batch_size)

    def save(self, path: Path) -> None:
        from aflite.training import TrainResult, save_checkpoint

        losses = [] if self.final_loss_ is None else [self.final_loss_]
        save_checkpoint(path, self.encoder, self.head, [], TrainResult(self.steps_, losses))

    def load(self, path: Path, n_classes: int) -> _FineTuned:
        from aflite.training import load_checkpoint

        self._build(n_classes)
        _, res = load_checkpoint(path, self.encoder, self.head)
        self.steps_, self.final_loss_ = res.steps, res.final_loss
        return self


# ---------------------------------------------------------------------------------------------- training sets


@dataclass
class TrainingSet:
    """A benchmark: rows of D (train part ∩ rows trains, held-out part ∩ rows tests)."""

    name: str
    kind: str  # "D", "filtered", "random", "single"
    rows: NDArray[np.intp]
    seed: int | None = None  # random subsets: one set per seed
    run: str | None = None
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Run:
    path: Path
    kept: NDArray[np.intp]
    summary: dict[str, Any]
    name: str
    warmup: NDArray[np.intp] = field(default_factory=lambda: np.empty(0, dtype=np.intp))


def _read_run(path: Path, id_to_row: dict[str, int], taken: set[str]) -> _Run:
    kept_file = path / "kept_ids.txt"
    if not kept_file.is_file():
        raise InputError(f"{path}: not a run directory (no kept_ids.txt)")
    ids = [ln.strip() for ln in kept_file.read_text(encoding="utf-8").splitlines() if ln.strip()]
    if not ids:
        raise InputError(f"{kept_file}: the filtered set D(Φ) is empty (no kept ids); nothing to train on")
    missing = [i for i in ids if i not in id_to_row]
    if missing:
        raise InputError(f"{kept_file}: {len(missing)} kept id(s) are not in the dataset, e.g. {missing[0]!r} "
                         "(was this run made from another file?)")
    summary: dict[str, Any] = {}
    if (path / "summary.json").is_file():
        try:
            summary = json.loads((path / "summary.json").read_text(encoding="utf-8"))
        except ValueError as exc:
            raise InputError(f"{path / 'summary.json'}: not valid JSON ({exc})") from exc
    f = summary.get("featurizer") or {}
    name = f"D(Φ {f['name']}{'' if f.get('view', 'pair') == 'pair' else '-' + f['view']})" if f else f"D(Φ {path.name})"
    if name in taken:
        name = f"D(Φ {path.name})"
    taken.add(name)
    # the warm-up slice trained Φ (paper §4): it must stay out of D, D(Φ) and every comparison subset
    warm_ids: list[str] = []
    if (path / "warmup_ids.txt").is_file():
        warm_ids = [ln.strip() for ln in (path / "warmup_ids.txt").read_text(encoding="utf-8").splitlines()
                    if ln.strip()]
    unknown = [i for i in warm_ids if i not in id_to_row]
    if unknown:
        raise InputError(f"{path / 'warmup_ids.txt'}: {len(unknown)} id(s) are not in the dataset, e.g. "
                         f"{unknown[0]!r} (was this run made from another file?)")
    warm = np.sort(np.asarray([id_to_row[i] for i in warm_ids], dtype=np.intp))
    return _Run(path, np.sort(np.asarray([id_to_row[i] for i in ids], dtype=np.intp)), summary, name, warm)


def single_iteration_rows(
    ds: Any, run: _Run, size: int, seed: int, cache_dir: Path, show_progress: bool = True,
    exclude: NDArray[np.intp] | None = None,
) -> tuple[NDArray[np.intp], dict[str, Any]]:
    """The paper's single-iteration baseline: one filtering phase (the run's Φ, m and t) over the rows the run
    filtered, removing the most predictable instances (ties broken at random) until ``size`` rows remain.
    Rows in ``exclude`` (warm-up slices of any run being compared) are never kept and do not count to ``size``."""
    from aflite.features import featurize
    from aflite.filter import predictability

    f = run.summary.get("featurizer")
    params = run.summary.get("parameters")
    if not f or not params:
        raise InputError(f"{run.path}: summary.json lacks the featurizer or parameters needed for the "
                         "single-iteration baseline (pass single_iteration=False / --no-single)")
    name, view, opts = f["name"], f.get("view", "pair"), dict(f.get("options") or {})
    run_seed = int(params.get("random_state", 0))
    kwargs: dict[str, Any] = {}
    if name == "warmup":
        kwargs = {"y": ds.labels.tolist(), "warmup_size": int(params["train_size"]), "warmup_seed": run_seed}
    elif name == "precomputed":
        kwargs = {"ids": ds.ids.tolist()}
    # the run's Φ is cached where the run put it: OUT/cache, or a shared folder given to both `aflite run --cache`
    # and this evaluation's cache (top level); recomputing it (an encoder pass, a warm-up fine-tuning) is the last
    # resort
    run_cache = run.path / "cache"
    if run_cache.is_dir():
        feat_cache = run_cache
    elif any(cache_dir.glob(f"{name}-{view}-*.json")):
        feat_cache = cache_dir
    else:
        feat_cache = cache_dir / "features"
    feats = featurize(ds.texts_a, ds.texts_b, name, view, cache_dir=feat_cache,
                      show_progress=show_progress, **kwargs, **opts)
    rows = np.asarray(feats.rows, dtype=np.intp)
    X = feats.X.toarray() if hasattr(feats.X, "toarray") else feats.X
    groups = ds.groups[rows] if (params.get("groups") and ds.groups is not None) else None
    ph = predictability(X, ds.labels[rows], n_partitions=int(params["n_partitions"]),
                        train_size=int(params["train_size"]), groups=groups, random_state=seed)
    p = ph.predictability
    allowed = np.ones(len(rows), dtype=bool) if exclude is None else ~np.isin(rows, exclude)
    n_remove = max(0, int(allowed.sum()) - size)
    scored = np.flatnonzero(~np.isnan(p) & allowed)
    rng = np.random.default_rng([seed, 3])
    order = scored[np.lexsort((rng.random(len(scored)), -p[scored]))]
    removed = order[:n_remove]
    keep = allowed.copy()
    keep[removed] = False
    info = {"featurizer": name, "view": view, "n_partitions": int(params["n_partitions"]),
            "train_size": int(params["train_size"]), "seed": seed, "scored": int(len(scored)),
            "removed": int(len(removed)), "excluded_warmup": int((~allowed).sum()),
            "min_removed_predictability": float(p[removed].min()) if len(removed) else None,
            "seconds": round(ph.seconds, 2)}
    if len(removed) < n_remove:
        info["note"] = f"only {len(scored)} rows were scored; {n_remove - len(removed)} fewer removed than asked"
    return np.sort(rows[keep]), info


# ---------------------------------------------------------------------------------------------- the report


def _majority(labels: NDArray[Any]) -> float:
    """Share of the most frequent gold label: the accuracy of always answering it (nan when empty)."""
    if len(labels) == 0:
        return float("nan")
    return float(Counter(np.asarray(labels).astype(str).tolist()).most_common(1)[0][1] / len(labels))


def _acc(pred: NDArray[Any], gold: NDArray[Any]) -> float:
    return float(np.mean(pred == gold)) if len(gold) else float("nan")


def _breakdown(pred: NDArray[Any], gold: NDArray[Any], groups: NDArray[Any] | None) -> dict[str, Any]:
    acc, maj = _acc(pred, gold), _majority(gold)
    res: dict[str, Any] = {
        "accuracy": acc,
        "n": int(len(gold)),
        # chance: always answering the most frequent gold label of these same rows, and the accuracy's lead on it
        "majority": maj,
        "delta_majority": acc - maj,
        "per_label": {str(lab): _acc(pred[gold == lab], gold[gold == lab]) for lab in np.unique(gold)},
    }
    if groups is not None:
        res["per_group"] = {
            str(g): {str(lab): _acc(pred[(groups == g) & (gold == lab)], gold[(groups == g) & (gold == lab)])
                     for lab in np.unique(gold[groups == g])} | {"all": _acc(pred[groups == g], gold[groups == g])}
            for g in np.unique(groups)
        }
    return res


@dataclass
class EvaluationReport:
    out: Path | None
    results: list[dict[str, Any]]  # one per (model, training set, seed)
    aggregate: dict[str, Any]
    training_sets: list[dict[str, Any]]
    tables: str
    config: dict[str, Any]


def _mean_std(values: list[float]) -> dict[str, Any]:
    v = [x for x in values if not (isinstance(x, float) and math.isnan(x))]
    if not v:
        return {"mean": None, "std": None, "n": 0}
    return {"mean": float(np.mean(v)), "std": float(np.std(v, ddof=1)) if len(v) > 1 else 0.0, "n": len(v)}


CHANCE_ROW = "Chance (majority class of the same rows)"


def _pct(x: float | None) -> str:
    return "–" if x is None or math.isnan(x) else f"{100 * x:.1f}"


def _pct_delta(x: float | None, y: float | None) -> str:
    return "–" if x is None or y is None or math.isnan(x) or math.isnan(y) else f"{100 * (x - y):+.1f}"


def _fmt_vs(ms: dict[str, Any] | None, chance: float | None) -> str:
    """``acc ± std (+lead)``: the accuracy and, in brackets, its lead over chance on the same rows (points)."""
    s = _fmt(ms)
    if s == "–" or chance is None or math.isnan(chance) or ms is None:
        return s
    return f"{s} ({100 * (ms['mean'] - chance):+.1f})"


def _ood_summary(aggregate: dict[str, Any], specs: list[ModelSpec], cols: list[str],
                 deltas: list[tuple[str, str]], eval_sets: Sequence[EvalSet]) -> list[str]:
    """One table for every external set: rows = (set, model) with a chance row per set, columns = training sets."""
    head = ["Evaluation set", "Trained model"] + cols + ["Δ" if len(deltas) == 1 else f"Δ {f}" for f, _ in deltas]
    out = ["", "## Out of distribution at a glance", "",
           "Accuracy in % on each external set (bracketed: points over chance, the majority-class rate of the set's "
           "gold labels in its own label space); per-label and per-group detail follows.", "",
           "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for es in eval_sets:
        first = aggregate[specs[0].key]
        ch = {}
        for c in cols:
            m = first.get(c, {}).get("external", {}).get(es.name, {}).get("majority")
            ch[c] = None if not m or m.get("mean") is None else float(m["mean"])
        n = first.get("D", {}).get("external", {}).get(es.name, {}).get("n", len(es))
        out.append("| " + " | ".join([f"{es.name} ({n} rows)", CHANCE_ROW] + [_pct(ch[c]) for c in cols]
                                     + [_pct_delta(ch[f], ch[b]) for f, b in deltas]) + " |")
        for spec in specs:
            a = aggregate[spec.key]
            ext = {c: a.get(c, {}).get("external", {}).get(es.name) for c in cols}
            row = [es.name, spec.label]
            for c in cols:
                e = ext[c]
                if e is None:
                    row.append("–")
                    continue
                m = e.get("majority")
                row.append(_fmt_vs(e["accuracy"], None if not m or m.get("mean") is None else float(m["mean"])))
            for f, base in deltas:
                x = (ext[f] or {}).get("accuracy")
                y = (ext[base] or {}).get("accuracy")
                row.append(f"{100 * (x['mean'] - y['mean']):+.1f}" if x and y and x["mean"] is not None
                           and y["mean"] is not None else "–")
            out.append("| " + " | ".join(row) + " |")
    return out


def _fmt(ms: dict[str, Any] | None) -> str:
    if not ms or ms.get("mean") is None:
        return "–"
    s = f"{100 * ms['mean']:.1f}"
    return s + (f" ± {100 * ms['std']:.1f}" if ms["n"] > 1 else "")


@limited  # one thread policy (aflite.threads)
def evaluate(
    data: str | Path,
    runs: Sequence[str | Path],
    out: str | Path | None = None,
    *,
    models: Sequence[str | ModelSpec] = DEFAULT_MODELS,
    seeds: int | Sequence[int] = 3,
    heldout: float = 0.2,
    split_seed: int = 0,
    random_baseline: bool = True,
    single_iteration: bool = True,
    eval_sets: Sequence[EvalSet] = (),
    finetune: FinetuneOptions | None = None,
    cache_dir: str | Path | None = None,
    dataset_options: dict[str, Any] | None = None,
    minilm_options: dict[str, Any] | None = None,
    show_progress: bool = True,
    tests: Sequence[EvalSet] = (),
    split: bool = True,
) -> EvaluationReport:
    """Train every model on D, each D(Φ), same-size random subsets and single-iteration sets; test each on its
    own held-out part, on all of D's held-out part, on each separate test set in ``tests`` (same labels as D,
    e.g. SNLI dev / test / test_hard: Table 3 shape) and on ``eval_sets`` (HANS, ...: Table 1 shape). With
    ``split=False`` D is not split: every benchmark trains on all its rows and is scored on ``tests`` and
    ``eval_sets`` only (the paper's protocol when D is a training set). Rows of a run's warm-up slice
    (``warmup_ids.txt``) are left out of D, every D(Φ) and every comparison subset. Writes ``results.json``,
    ``tables.md`` and ``accuracy.png`` to ``out`` when given. See the module docstring for the protocol."""
    from tqdm import tqdm

    from aflite.data import load_dataset

    specs = [ModelSpec.parse(m) for m in models]
    if not specs:
        raise ParameterError("no models to evaluate")
    if len({s.key for s in specs}) != len(specs):
        raise ParameterError("a model is listed twice")
    seed_list = list(range(seeds)) if isinstance(seeds, int) else [int(s) for s in seeds]
    if not seed_list:
        raise ParameterError("seeds must be a positive count or a non-empty list")
    ft = finetune or FinetuneOptions()
    ft.check()
    from aflite import images

    image_featurizers = {s.featurizer for s in specs} & set(images.IMAGE_FEATURIZERS)
    is_images = images.is_image_folder(data) or bool(image_featurizers)
    if is_images and ft.image_model is None:  # finetune: models fine-tune the image network
        from dataclasses import replace

        ft = replace(ft, image_model="hf-image" if ft.model_path else "efficientnet-lite0")
    out_p = None if out is None else Path(out)
    cache = Path(cache_dir) if cache_dir is not None else (out_p / "cache" if out_p is not None else None)
    if cache is None:
        raise ParameterError("give out or cache_dir (features and models are cached there)")
    t_start = time.perf_counter()

    if is_images:
        ds = images.load_image_dataset(data)
    else:
        ds = load_dataset(data, **(dataset_options or {}))
    n = len(ds)
    if ds.groups is not None:  # identical texts with different labels across groups pull accuracies below chance
        from aflite.data import warn_twins

        warn_twins(ds, sorted({sp_.view for sp_ in specs}), str((dataset_options or {}).get("groups") or "premise"))
    for sp_ in specs:
        if sp_.view == "hypothesis" and not ds.is_pair:
            raise ParameterError(f"model {sp_.key}: the dataset has one text column; use view 'premise' or 'pair'")
    classes = np.unique(ds.labels.astype(str))
    if len(classes) < 2:
        raise InputError(f"{data}: need at least two labels, found {classes.tolist()}")
    y_all = np.searchsorted(classes, ds.labels.astype(str)).astype(np.int64)
    d_corpus = _corpus("D", ds.texts_a, ds.texts_b)
    id_to_row = {str(i): r for r, i in enumerate(ds.ids.tolist())}
    if not runs:
        raise ParameterError("give at least one run directory (made by aflite run on this dataset)")
    taken: set[str] = set()
    run_objs = [_read_run(Path(r), id_to_row, taken) for r in runs]
    if not split and not tests and not eval_sets:
        raise ParameterError("without the held-out split (--no-split) give at least one test set (--test) or an "
                             "evaluation set (--hans / --ood)")
    is_held = split_heldout(n, ds.groups, heldout, split_seed) if split else np.zeros(n, dtype=bool)
    # warm-up slices (of every run compared) trained a Φ: out of D, D(Φ), random and single-iteration sets
    warm = np.unique(np.concatenate([r.warmup for r in run_objs])).astype(np.intp)
    pool = np.setdiff1d(np.arange(n), warm).astype(np.intp)
    names = [es.name for es in list(tests) + list(eval_sets)]
    if len(set(names)) != len(names):
        raise ParameterError(f"two test/evaluation sets share a name: {sorted(names)}")

    for es in list(eval_sets) + list(tests):
        if es.texts_b is None and any(s.view in ("pair", "hypothesis") for s in specs) and ds.is_pair:
            raise InputError(f"evaluation set {es.name}: one text column, but the models read text pairs")
        reachable = {es.pred_map.get(c, c) for c in classes}
        bad = sorted(set(np.unique(es.labels).tolist()) - reachable)
        if bad:
            raise InputError(f"evaluation set {es.name} ({', '.join(es.sources) or 'in memory'}): gold label(s) "
                             f"{bad} are not labels the models can predict {sorted(reachable)}; map them with a "
                             "label map (--ood-label-map) or a prediction map (--ood-pred-map)")

    # ---------------- training sets
    sets: list[TrainingSet] = [TrainingSet("D", "D", pool, info={"excluded_warmup": int(len(warm))}
                                           if len(warm) else {})]
    for ri, r in enumerate(run_objs):
        kept = np.setdiff1d(r.kept, warm).astype(np.intp)
        sets.append(TrainingSet(r.name, "filtered", kept, run=str(r.path),
                                info={"excluded_warmup": int(len(r.kept) - len(kept))} if len(warm) else {}))
        size = len(kept)
        if random_baseline:
            for s in seed_list:
                rows = pool[np.random.default_rng([s, 1, ri]).choice(len(pool), size=size, replace=False)]
                rows = np.sort(rows)
                sets.append(TrainingSet(f"D_random({size})" + (f" [{r.name}]" if len(run_objs) > 1 else ""),
                                        "random", rows.astype(np.intp), seed=s, run=str(r.path)))
        if single_iteration:
            rows, info = single_iteration_rows(ds, r, size, int(r.summary.get("seed") or 0), cache, show_progress,
                                               exclude=warm)
            sets.append(TrainingSet(f"single-iteration({r.name.removeprefix('D(').removesuffix(')')})", "single",
                                    rows, run=str(r.path), info=info))
    set_info = []
    for ts in sets:
        tr = ts.rows[~is_held[ts.rows]]
        te = ts.rows[is_held[ts.rows]]
        if len(tr) == 0 or (split and len(te) == 0):
            raise InputError(f"training set {ts.name}: its {'training' if len(tr) == 0 else 'held-out'} part is "
                             "empty")
        missing = sorted(set(classes.tolist()) - set(ds.labels[tr].astype(str).tolist()))
        if missing:
            raise InputError(f"training set {ts.name}: label(s) {missing} of D are absent from its training part; "
                             "the models could never predict them")
        set_info.append({"name": ts.name, "kind": ts.kind, "seed": ts.seed, "run": ts.run, "size": int(len(ts.rows)),
                         "train": int(len(tr)), "heldout": int(len(te)), "info": ts.info,
                         "label_counts": dict(sorted(Counter(ds.labels[ts.rows].astype(str).tolist()).items()))})

    held_rows = np.flatnonzero(is_held & np.isin(np.arange(n), pool))
    corpora = [(es, _corpus(es.name, es.texts_a, es.texts_b)) for es in eval_sets]
    test_corpora = [(es, _corpus(es.name, es.texts_a, es.texts_b)) for es in tests]
    store = _FeatureStore(d_corpus, cache, show_progress, dict(minilm_options or {}))
    for r in run_objs:  # image features at the size (and model) the run's Φ used, so a shared cache is reused
        f = r.summary.get("featurizer") or {}
        if f.get("name") in image_featurizers:
            store.image_options = {k: v for k, v in (f.get("options") or {}).items()
                                   if k in ("image_size", "model_path", "pretrained") and v is not None}
    torch_device = None
    if any(s.kind == "finetune" for s in specs):
        from aflite.features import _import_torch, _resolve_device

        torch_device = _resolve_device(ft.device, _import_torch()[0])
    on_cpu = torch_device == "cpu"
    ft_train_cap = ft.max_train if ft.max_train is not None else (ft.cpu_max_train if on_cpu else None)
    ft_eval_cap = ft.eval_max if ft.eval_max is not None else (ft.cpu_eval_max if on_cpu else None)

    jobs = []
    for spec in specs:
        for ts in sets:
            for js in ([ts.seed] if ts.seed is not None else seed_list if spec.stochastic else seed_list[:1]):
                jobs.append((spec, ts, int(js)))
    results: list[dict[str, Any]] = []
    bar = tqdm(jobs, desc="train + evaluate", unit="model", disable=not show_progress, dynamic_ncols=True)
    for spec, ts, seed in bar:
        bar.set_postfix_str(f"{spec.key} on {ts.name} seed {seed}")
        results.append(_run_job(spec, ts, seed, ds, y_all, classes, is_held, held_rows, corpora, store, cache,
                                ft, ft_train_cap, ft_eval_cap, show_progress, tests=test_corpora))

    aggregate = _aggregate(results, specs, sets, eval_sets, tests)
    config = {
        "dataset": str(data), "dataset_size": n, "classes": classes.tolist(), "runs": [str(r.path) for r in run_objs],
        "models": [s.key for s in specs], "seeds": seed_list, "heldout": heldout, "split_seed": split_seed,
        "heldout_rows": int(len(held_rows)), "split": split, "excluded_warmup_rows": int(len(warm)),
        "protocol": ("D split once by premise group into train/held-out; every benchmark trains on its rows in "
                     "the train part and is tested on its rows in the held-out part (own held-out) and on the whole "
                     "held-out part of D (original held-out)") if split else
        "D not split: every benchmark trains on all its rows and is tested on separate test sets only",
        "tests": [{"name": es.name, "sources": es.sources, "size": len(es), "majority": _majority(es.labels),
                   "label_counts": dict(sorted(Counter(es.labels.tolist()).items()))} for es in tests],
        "finetune": asdict(ft) | {"device": torch_device, "train_cap_used": ft_train_cap, "eval_cap_used": ft_eval_cap}
        if torch_device else None,
        "eval_sets": [{"name": es.name, "sources": es.sources, "size": len(es), "pred_map": es.pred_map}
                      for es in eval_sets],
        "wall_seconds": round(time.perf_counter() - t_start, 1),
    }
    tables = render_tables(aggregate, specs, sets, set_info, eval_sets, config, tests)
    report = EvaluationReport(out_p, results, aggregate, set_info, tables, config)
    if out_p is not None:
        out_p.mkdir(parents=True, exist_ok=True)
        write_json(out_p / "results.json", {"config": config, "training_sets": set_info, "aggregate": aggregate,
                                            "runs": results})
        write_text(out_p / "tables.md", tables)
        plot_report(report, out_p / "accuracy.png")
    return report


def _run_job(spec: ModelSpec, ts: TrainingSet, seed: int, ds: Any, y_all: NDArray[np.int64],
             classes: NDArray[Any], is_held: NDArray[np.bool_], held_rows: NDArray[np.intp],
             corpora: list[tuple[EvalSet, _Corpus]], store: _FeatureStore, cache: Path, ft: FinetuneOptions,
             ft_train_cap: int | None, ft_eval_cap: int | None, show_progress: bool,
             tests: Sequence[tuple[EvalSet, _Corpus]] = ()) -> dict[str, Any]:
    t0 = time.perf_counter()
    d = store.d
    tr = ts.rows[~is_held[ts.rows]]
    used = tr
    if spec.kind == "finetune" and ft_train_cap is not None and len(tr) > ft_train_cap:
        used = np.sort(np.random.default_rng([seed, 13]).choice(tr, size=ft_train_cap, replace=False))
    opts: dict[str, Any] = {"spec": spec.key, "format": _CACHE_FORMAT}
    if spec.kind == "finetune":
        opts["finetune"] = {k: v for k, v in asdict(ft).items() if k not in ("eval_max", "cpu_eval_max", "device",
                                                                             "num_threads")
                            and not (k.startswith("image_") and ft.image_model is None)}  # text keys unchanged
    if spec.featurizer == "minilm":
        opts["minilm"] = store.minilm_options
    key = _hash(opts, d.fingerprint, classes.tolist(), used.astype(np.int64), y_all[used],
                seed if spec.stochastic else None)[:24]
    mdir = cache / "models"
    meta_path = mdir / f"{spec.kind}-{key}.json"
    model: Any = None

    def get_model() -> Any:
        nonlocal model
        if model is not None:
            return model
        path = mdir / f"{spec.kind}-{key}.pt"
        m: Any
        if spec.kind == "finetune":
            m = _FineTuned(ft, seed, show_progress)
            if path.is_file():
                m.load(path, len(classes))
            else:
                a, b = d.view(spec.view, used)
                m.fit(a, b, y_all[used], len(classes))
                m.save(path)
                write_json(meta_path, {"steps": m.steps_, "final_loss": m.final_loss_})
        else:
            # scikit-learn models are not written to disk: loading them would mean unpickling files from a
            # user-given cache folder. Their predictions are cached (plain .npy) and they are cheap to refit.
            if spec.kind in FEATURE_MODELS:
                assert spec.featurizer is not None
                X = store.get(spec.featurizer, spec.view, d)
                m = _feature_classifier(spec.kind, seed).fit(X[used], y_all[used])
            elif spec.kind == "ngram":
                a, b = d.view(spec.view, used)
                m = _NgramLR().fit(a, b, y_all[used], len(classes))
            else:
                a, b = d.view(spec.view, used)
                m = _MaxPPMI().fit(a, b, y_all[used], len(classes))
        model = m
        return m

    def predict(corpus: _Corpus, rows: NDArray[np.intp]) -> NDArray[np.int64]:
        path = cache / "predictions" / f"{key}-{_hash(corpus.fingerprint, rows.astype(np.int64))[:16]}.npy"
        if path.is_file():
            return np.load(path, allow_pickle=False)
        m = get_model()
        if spec.kind in FEATURE_MODELS:
            assert spec.featurizer is not None
            p = np.asarray(m.predict(store.get(spec.featurizer, spec.view, corpus)[rows]), dtype=np.int64)
        else:
            a, b = corpus.view(spec.view, rows)
            p = np.asarray(m.predict(a, b), dtype=np.int64)
        write_npy(path, p)
        return p

    rec: dict[str, Any] = {
        "model": spec.key, "model_label": spec.label, "train_set": ts.name, "kind": ts.kind, "seed": seed,
        "train_rows": int(len(tr)), "train_used": int(len(used)),
    }
    if len(held_rows):
        pred_held = classes[predict(d, held_rows)]
        gold_held = ds.labels[held_rows].astype(str)
        own = np.isin(held_rows, ts.rows)
        rec["own_heldout"] = _breakdown(pred_held[own], gold_held[own], None)
        rec["original_heldout"] = _breakdown(pred_held, gold_held, None)
        rec["majority_own_heldout"] = _majority(gold_held[own])
    rec["tests"] = {}
    for es, corpus in tests:
        rows = np.arange(len(es))
        if spec.kind == "finetune" and ft_eval_cap is not None:
            rows = _stratified_sample(es.labels, es.groups, ft_eval_cap, 0)
        raw = classes[predict(corpus, rows)]
        mapped = np.asarray([es.pred_map.get(str(c), str(c)) for c in raw])
        rec["tests"][es.name] = _breakdown(mapped, es.labels[rows], None) | {"majority": _majority(es.labels[rows])}
    rec["external"] = {}
    for es, corpus in corpora:
        rows = np.arange(len(es))
        if spec.kind == "finetune" and ft_eval_cap is not None:
            rows = _stratified_sample(es.labels, es.groups, ft_eval_cap, 0)
        raw = classes[predict(corpus, rows)]
        mapped = np.asarray([es.pred_map.get(str(c), str(c)) for c in raw])
        rec["external"][es.name] = _breakdown(mapped, es.labels[rows], None if es.groups is None else es.groups[rows])
    if meta_path.is_file():
        rec.update(json.loads(meta_path.read_text(encoding="utf-8")))
    rec["seconds"] = round(time.perf_counter() - t0, 2)
    return rec


def _aggregate(results: list[dict[str, Any]], specs: list[ModelSpec], sets: list[TrainingSet],
               eval_sets: Sequence[EvalSet], tests: Sequence[EvalSet] = ()) -> dict[str, Any]:
    """{model: {set name: {metric: mean/std/n}}} over seeds (random subsets: over their per-seed draws)."""
    agg: dict[str, Any] = {}
    names = list(dict.fromkeys(ts.name for ts in sets))
    for spec in specs:
        per: dict[str, Any] = {}
        for nm in names:
            rs = [r for r in results if r["model"] == spec.key and r["train_set"] == nm]
            if not rs:
                continue
            entry: dict[str, Any] = {
                "train_rows": int(np.mean([r["train_rows"] for r in rs])),
                "train_used": int(np.mean([r["train_used"] for r in rs])),
                "tests": {},
                "external": {},
            }
            if "own_heldout" in rs[0]:
                entry["own_heldout"] = _mean_std([r["own_heldout"]["accuracy"] for r in rs])
                entry["original_heldout"] = _mean_std([r["original_heldout"]["accuracy"] for r in rs])
                for part in ("own_heldout", "original_heldout"):
                    entry[f"{part}_majority"] = _mean_std([r[part]["majority"] for r in rs])
                    entry[f"{part}_delta_majority"] = _mean_std([r[part]["delta_majority"] for r in rs])
            for es in tests:
                tx = [r["tests"][es.name] for r in rs]
                entry["tests"][es.name] = {
                    "accuracy": _mean_std([x["accuracy"] for x in tx]), "n": tx[0]["n"],
                    "majority": tx[0]["majority"],
                    "per_label": {lab: _mean_std([x["per_label"].get(lab, float("nan")) for x in tx])
                                  for lab in tx[0]["per_label"]}}
            for es in eval_sets:
                ext = [r["external"][es.name] for r in rs]
                e: dict[str, Any] = {"accuracy": _mean_std([x["accuracy"] for x in ext]), "n": ext[0]["n"],
                                     "majority": _mean_std([x["majority"] for x in ext]),
                                     "delta_majority": _mean_std([x["delta_majority"] for x in ext]),
                                     "per_label": {lab: _mean_std([x["per_label"].get(lab, float("nan")) for x in ext])
                                                   for lab in ext[0]["per_label"]}}
                if "per_group" in ext[0]:
                    e["per_group"] = {g: {lab: _mean_std([x["per_group"][g].get(lab, float("nan")) for x in ext])
                                          for lab in ext[0]["per_group"][g]} for g in ext[0]["per_group"]}
                entry["external"][es.name] = e
            per[nm] = entry
        agg[spec.key] = per
    return agg


def _columns(sets: list[TrainingSet]) -> tuple[list[str], list[tuple[str, str]]]:
    """Table 3 column order (D, random, single-iteration, D(Φ) per run) and the (D(Φ), random) pairs for Δ."""
    names = ["D"]
    deltas = []
    runs = list(dict.fromkeys(ts.run for ts in sets if ts.run))
    for r in runs:
        mine = [ts for ts in sets if ts.run == r]
        for kind in ("random", "single", "filtered"):
            for ts in mine:
                if ts.kind == kind and ts.name not in names:
                    names.append(ts.name)
        deltas.append(next(ts.name for ts in mine if ts.kind == "filtered"))
    return names, [(f, "D") for f in deltas]


def render_tables(aggregate: dict[str, Any], specs: list[ModelSpec], sets: list[TrainingSet],
                  set_info: list[dict[str, Any]], eval_sets: Sequence[EvalSet], config: dict[str, Any],
                  tests: Sequence[EvalSet] = ()) -> str:
    """Markdown: Table 3-shaped (rows = models, columns = training sets, Δ last) on the own held-out part, on
    the original held-out part (when D was split) and on each separate test set (with its majority rate);
    Table 1-shaped tables (rows = training sets) per external set and model."""
    cols, deltas = _columns(sets)
    dname = "Δ" if len(deltas) == 1 else "Δ {}"
    sizes: dict[str, list[int]] = {}
    for si in set_info:
        sizes.setdefault(si["name"], []).append(si["train"])
    lines = [f"# aflite evaluate: {config['dataset']}", "",
             f"Accuracy in %, mean ± std over seeds {config['seeds']} (no ± where the model and the set are "
             f"deterministic); in brackets, points over chance (the majority-class rate of the same rows, "
             f"each table's '{CHANCE_ROW}' row). " + (f"Held-out part: {config['heldout_rows']} rows of D "
             f"({100 * config['heldout']:.0f} % of premise groups, split seed {config['split_seed']})."
                                    if config.get("split", True) else
                                    "D was not split: every training set is used whole; scores are on the test "
                                    "sets.")]
    if config.get("excluded_warmup_rows"):
        lines.append(f"{config['excluded_warmup_rows']} rows of D formed a run's warm-up slice (they trained Φ) and "
                     "are left out of D, every D(Φ), the random subsets and the single-iteration sets.")
    if config.get("finetune"):
        f = config["finetune"]
        lines.append(f"Fine-tuning: {f['device']}, lr {f['lr']}, {f['epochs']} epochs, batch {f['batch_size']}, "
                     f"training rows capped at {f['train_cap_used']}, external sets capped at {f['eval_cap_used']} "
                     "(stratified sample).")

    def t3(metric: str, title: str, test: str | None = None) -> list[str]:
        def get(entry: dict[str, Any]) -> Any:
            return entry.get(metric) if test is None else entry.get("tests", {}).get(test, {}).get("accuracy")

        def chance(entry: dict[str, Any]) -> float | None:
            if test is not None:
                m = entry.get("tests", {}).get(test, {}).get("majority")
                return None if m is None else float(m["mean"] if isinstance(m, dict) else m)
            m = entry.get(f"{metric}_majority")
            return None if not m or m.get("mean") is None else float(m["mean"])

        head = ["Model"] + cols + [dname.format(f) for f, _ in deltas]
        out = ["", f"## {title}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        first = aggregate[specs[0].key]
        ch = {c: chance(first.get(c, {})) for c in cols}
        row = [CHANCE_ROW] + [_pct(ch[c]) for c in cols]
        row += [_pct_delta(ch[f], ch[b]) for f, b in deltas]
        out.append("| " + " | ".join(row) + " |")
        for spec in specs:
            a = aggregate[spec.key]
            row = [spec.label]
            row += [_fmt_vs(get(a.get(c, {})), chance(a.get(c, {}))) for c in cols]
            for f, base in deltas:
                x, y = get(a.get(f, {})), get(a.get(base, {}))
                if not (x and y and x["mean"] is not None and y["mean"] is not None):
                    row.append("–")
                    continue
                cell = f"{100 * (x['mean'] - y['mean']):+.1f}"
                cf, cb = chance(a.get(f, {})), chance(a.get(base, {}))
                if cf is not None and cb is not None and abs(cf - cb) >= 0.0005:
                    # chance moved (filtering changed the label mix): say how the lead over chance moved too
                    cell += f" (lead {100 * ((x['mean'] - cf) - (y['mean'] - cb)):+.1f})"
                row.append(cell)
            out.append("| " + " | ".join(row) + " |")
        size_row = ["Training set size"] + [str(int(np.mean(sizes[c]))) for c in cols]
        size_row += [f"{int(np.mean(sizes[f])) - int(np.mean(sizes[b])):+d}" for f, b in deltas]
        out.append("| " + " | ".join(size_row) + " |")
        return out

    if config.get("split", True):
        lines += t3("own_heldout", "Table 3 shape: each benchmark's own held-out part")
        lines += t3("original_heldout", "The original (unfiltered) held-out part of D")
    for es in tests:
        tinfo = next(t for t in config.get("tests", []) if t["name"] == es.name)
        lines += t3("", f"Table 3 shape: test set {es.name} ({tinfo['size']} rows; majority class "
                        f"{100 * tinfo['majority']:.1f} %)", test=es.name)
    used = {spec.key: {c: aggregate[spec.key].get(c, {}).get("train_used") for c in cols} for spec in specs}
    capped = [k for k, v in used.items() if any(v[c] != aggregate[k].get(c, {}).get("train_rows") for c in cols)]
    for k in capped:
        lines.append(f"\n{k}: trained on a capped sample: " + ", ".join(f"{c} {used[k][c]}" for c in cols))
    if eval_sets:
        lines += _ood_summary(aggregate, specs, cols, deltas, eval_sets)
    for es in eval_sets:
        for spec in specs:
            a = aggregate[spec.key]
            first = a["D"]["external"][es.name]
            labs = list(first["per_label"])
            groups = list(first.get("per_group", {}))
            head = ["Train data"] + [f"{g}: gold {lab}" for g in groups for lab in labs
                                     if lab in first["per_group"][g]]
            head += [f"all: gold {lab}" for lab in labs] + ["all rows"]
            lines += ["", f"## Table 1 shape: {es.name} ({first['n']} rows), {spec.label}", "",
                      "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
            for c in cols:
                e = a.get(c, {}).get("external", {}).get(es.name)
                if e is None:
                    continue
                row = [c] + [_fmt(e["per_group"][g][lab]) for g in groups for lab in labs
                             if lab in first["per_group"][g]]
                m = e.get("majority")
                row += [_fmt(e["per_label"][lab]) for lab in labs]
                row += [_fmt_vs(e["accuracy"], None if not m or m.get("mean") is None else float(m["mean"]))]
                lines.append("| " + " | ".join(row) + " |")
    lines += ["", "## Training sets", "", "| set | seed | size | train part | held-out part | labels |",
              "|---|---|---|---|---|---|"]
    for si in set_info:
        lines.append(f"| {si['name']} | {'' if si['seed'] is None else si['seed']} | {si['size']} | {si['train']} | "
                     f"{si['heldout']} | {', '.join(f'{k} {v}' for k, v in si['label_counts'].items())} |")
    lines += ["", f"Wall time: {config['wall_seconds']} s."]
    return "\n".join(lines) + "\n"


def plot_report(report: EvaluationReport, path: Path) -> None:
    """Bar chart: own held-out accuracy per model and training set (± std), and external sets if any."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    agg = report.aggregate
    models = list(agg)
    cols = list(dict.fromkeys(si["name"] for si in report.training_sets))
    ext_names = [e["name"] for e in report.config["eval_sets"]]
    test_names = [t["name"] for t in report.config.get("tests", [])]
    panels: list[tuple[str, str | None]] = [("own held-out", None)] if report.config.get("split", True) else []
    panels += [(t, "test:" + t) for t in test_names] + [(e, e) for e in ext_names]
    fig, axes = plt.subplots(1, len(panels), figsize=(max(6.0, 1.1 * len(models) * len(panels) + 2), 4.2),
                             squeeze=False)
    width = 0.8 / max(1, len(cols))
    for ax, (title, ext) in zip(axes[0], panels, strict=True):
        for j, c in enumerate(cols):
            means, stds = [], []
            for m in models:
                e = agg[m].get(c, {})
                if ext is None:
                    ms = e.get("own_heldout")
                elif ext.startswith("test:") and ext[5:] in test_names:
                    ms = e.get("tests", {}).get(ext[5:], {}).get("accuracy")
                else:
                    ms = e.get("external", {}).get(ext, {}).get("accuracy")
                means.append(100 * ms["mean"] if ms and ms["mean"] is not None else np.nan)
                stds.append(100 * ms["std"] if ms and ms["std"] is not None else 0.0)
            ax.bar(np.arange(len(models)) + (j - (len(cols) - 1) / 2) * width, means, width, yerr=stds, label=c,
                   capsize=2)
        ax.set_xticks(np.arange(len(models)))
        ax.set_xticklabels(models, rotation=30, ha="right", fontsize=7)
        ax.set_ylabel("accuracy (%)")
        ax.set_title(title)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    with atomic_open(path, "wb") as fh:
        fig.savefig(fh, format="png", dpi=120)
    plt.close(fig)
