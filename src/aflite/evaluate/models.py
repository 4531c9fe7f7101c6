"""The models :func:`~aflite.evaluate.compare_runs` trains (:class:`ModelSpec`): feature probes and MLPs on
cached features, TF-IDF n-gram LR, Max-PPMI and fine-tuned encoders, and the feature store they share."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from aflite.atomic import load_cached_npy, write_npy
from aflite.defaults import FINETUNE_CPU_MAX_TRAIN, LR_CANDIDATES
from aflite.device import import_torch, resolve_model_path, torch_device
from aflite.encoders import TextEncoder, training
from aflite.encoders.images import ImageEncoder
from aflite.encoders.training import (
    EVALUATE,
    WARMUP_IMAGE,
    TrainResult,
    load_checkpoint,
    predict_classes,
    save_checkpoint,
)
from aflite.errors import ParameterError
from aflite.features import DEFAULT_MAX_LENGTH, NgramFeaturizer, featurize
from aflite.features.base import VIEWS
from aflite.features.registry import featurizer_names, spec
from aflite.hashing import data_fingerprint
from aflite.option import OptionValue

MODEL_KINDS = ("probe", "mlp", "ngram", "ppmi", "finetune")
FEATURE_MODELS = ("probe", "mlp")
# FinetuneOptions fields that choose the learning rate, not the model trained with it (left out of cache keys)
LR_CHECK_FIELDS = ("lr_candidates", "lr_check_rows", "cpu_lr_check_rows")


def probe_featurizers() -> tuple[str, ...]:
    """The featurizers a probe or MLP model may read: the registry's for ``evaluate``, read at each call so that
    one registered later is offered (the image featurizers serve image datasets)."""
    return featurizer_names("evaluate")


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
            offered = probe_featurizers()
            if not rest or rest[0] not in offered:
                raise ParameterError(f"model {text!r}: {kind} needs a featurizer ({', '.join(offered)}), "
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
    """Fine-tuning recipe. Defaults: appendix A.6 (Adam, eps 1e-8, 3 epochs, batch 92; the HF GLUE script's max
    length 128 and linearly decaying learning rate). The appendix's lr 1e-5 was written for RoBERTa-large; a
    small encoder needs another one, so with ``lr`` None a text model's rate is chosen once per evaluate run by a
    short learning-rate check (:mod:`aflite.evaluate.lr_check`) among ``lr_candidates`` on a seeded slice of
    ``lr_check_rows`` rows of D's training part (``cpu_lr_check_rows`` on a CPU) and used for every benchmark.
    ``lr`` given, or ``lr_candidates`` empty: no check; the given rate, else 1e-5 for text and, for an image
    network, the image warm-up preset's 1e-3 (:data:`aflite.encoders.training.WARMUP_IMAGE`: at 1e-5-5e-5 a pretrained
    CNN with a fresh head hardly moves in a short run). ``max_train`` caps the training rows (a seeded sample);
    when None, a CPU run uses ``cpu_max_train`` and a GPU run uses everything. ``eval_max`` likewise caps each
    external set (a fixed stratified sample) on a CPU."""

    model_path: str | None = None
    lr: float | None = None
    epochs: int = 3
    batch_size: int = 92
    eps: float = 1e-8
    max_length: int = 128
    max_train: int | None = None
    cpu_max_train: int | None = FINETUNE_CPU_MAX_TRAIN
    eval_max: int | None = None
    cpu_eval_max: int | None = 3000
    max_steps: int | None = None
    device: str | None = None
    num_threads: int | None = None
    # image datasets: the network to fine-tune (efficientnet-lite0, or hf-image at model_path) and its input size
    image_model: str | None = None
    image_size: int = 224
    # the learning-rate check (text models, lr None): candidates, and the slice of D's training part it uses
    lr_candidates: tuple[float, ...] = LR_CANDIDATES
    lr_check_rows: int | None = 6000
    cpu_lr_check_rows: int | None = 1000

    def checks_lr(self) -> bool:
        """Whether a learning-rate check chooses the rate: a text model, no ``lr`` given, candidates listed."""
        return self.lr is None and not self.image_model and bool(self.lr_candidates)

    def resolved_lr(self) -> float:
        """The learning rate in force: the given one, else the text or image default (see the class doc)."""
        if self.lr is not None:
            return float(self.lr)

        return WARMUP_IMAGE.lr if self.image_model else 1e-5

    def check(self) -> None:
        if (self.lr is not None and not self.lr > 0) or not self.eps > 0:
            raise ParameterError("fine-tuning lr and eps must be > 0")
        if self.epochs < 1 or self.batch_size < 1 or self.max_length < 8:
            raise ParameterError("fine-tuning needs epochs >= 1, batch_size >= 1 and max_length >= 8")
        if any(not c > 0 for c in self.lr_candidates):
            raise ParameterError(f"learning-rate candidates must be > 0, got {list(self.lr_candidates)}")
        for name in ("max_train", "cpu_max_train", "eval_max", "cpu_eval_max", "max_steps", "lr_check_rows",
                     "cpu_lr_check_rows"):
            v = getattr(self, name)
            if v is not None and v < 1:
                raise ParameterError(f"fine-tuning {name} must be >= 1 (or unset), got {v}")


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

    def __init__(self, d: _Corpus, cache: Path, show_progress: bool, text_options: dict[str, OptionValue]) -> None:
        self.d = d
        self.cache = cache
        self.show_progress = show_progress
        self.text_options = text_options  # the command's featurizer options, for the text featurizers
        self.image_options: dict[str, OptionValue] = {}
        self.read_only: list[Path] = []  # the runs' caches: their Φ is reused, never written
        self._memo: dict[tuple[str, str, str], NDArray[np.float32]] = {}
        self._ngram: dict[str, NgramFeaturizer] = {}  # fitted on D, per view

    def options_for(self, featurizer: str) -> dict[str, OptionValue]:
        """The options a fixed encoder runs with: the run's image options for an image encoder, the command's
        featurizer options that the text encoder takes for a text one."""
        if spec(featurizer).modality == "image":
            return self.image_options
        return {k: v for k, v in self.text_options.items() if spec(featurizer).takes(k)}

    def keyed_options(self, featurizer: str | None) -> dict[str, OptionValue] | None:
        """The options that join a model's cache key: a fixed text encoder's (None for others)."""
        if featurizer is None or not spec(featurizer).frozen or spec(featurizer).modality != "text":
            return None
        return self.options_for(featurizer)

    def get(self, featurizer: str, view: str, corpus: _Corpus) -> NDArray[np.float32]:
        k = (featurizer, view, corpus.fingerprint)
        if k in self._memo:
            return self._memo[k]
        every = np.arange(len(corpus.texts_a))
        a, b = corpus.view(view, every)
        found = spec(featurizer)
        if found.frozen:  # a fixed encoder embeds every corpus on its own, at the top level of the cache folder

            # as `aflite run` and `aflite audit` lay it out, so that a shared cache folder (or a run's own cache,
            # read only) reuses the run's matrices instead of embedding D again; image options as the run used them
            options: dict[str, Any] = dict(self.options_for(featurizer))  # spread among featurize's own keywords
            x = np.asarray(featurize(a, b, featurizer, "pair", cache_dir=self.cache, read_only=self.read_only,
                                     show_progress=self.show_progress, **options).X,
                           dtype=np.float32)
        else:  # a featurizer fitted to its rows (n-grams): fitted on D, applied to every corpus
            path = self.cache / "features" / f"evalngram-{view}-{self.d.fingerprint[:16]}-{corpus.fingerprint[:16]}.npy"
            cached = load_cached_npy(path, len(a))
            if cached is not None:
                x = cached
            else:
                feat = self._ngram.get(view)
                if feat is None:
                    feat = NgramFeaturizer()
                    da, db = self.d.view(view, np.arange(len(self.d.texts_a)))
                    feat.fit(da, db)
                    self._ngram[view] = feat
                x = np.asarray(feat.transform(a, b), dtype=np.float32)
                write_npy(path, x)
        self._memo[k] = x
        return x


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
    the one trainer (:func:`aflite.encoders.training.fit_classifier`, preset ``EVALUATE`` with these options)."""

    def __init__(self, opts: FinetuneOptions, seed: int, show_progress: bool) -> None:
        self.opts = opts
        self.seed = seed
        self.show_progress = show_progress
        self.torch, _ = import_torch()
        if opts.num_threads is not None:
            self.torch.set_num_threads(int(opts.num_threads))
        # image networks: EfficientNet-Lite0 needs no folder; a text model defaults to the bundled MiniLM
        self.model_path = opts.model_path if opts.image_model else resolve_model_path(opts.model_path)
        self.device = torch_device(opts.device)
        self.steps_ = 0
        self.final_loss_: float | None = None
        self.first_loss_: float | None = None  # to tell a loss that fell from one that did not (degenerate.py)
        self.losses_: list[float] = []  # every step's training loss (the page's curve)

    def train_config(self) -> Any:
        o = self.opts
        return EVALUATE.replace(lr=o.resolved_lr(), eps=o.eps, epochs=o.epochs, batch_size=o.batch_size,
                                max_steps=o.max_steps, seed=self.seed, shuffle_seed=(self.seed, 11), device=self.device)

    def _new_encoder(self) -> Any:
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
        training.seeded(self.seed)
        self.encoder = self._new_encoder()
        self.head = training.make_head(self.torch, self.encoder.dim, n_classes, 0.1, self.device)

    def fit(self, a: list[str], b: list[str] | None, y: NDArray[np.int64], n_classes: int) -> _FineTuned:
        training.seeded(self.seed)
        self.encoder = self._new_encoder()
        items = self._items(a, b, self.opts.max_length)
        self.head, res = training.fit_classifier(self.encoder, items, y, n_classes, self.train_config(),
                                                 desc="fine-tuning", show_progress=self.show_progress)
        self.steps_, self.final_loss_, self.losses_ = res.steps, res.final_loss, list(res.losses)
        self.first_loss_ = res.losses[0] if res.losses else None
        return self

    def predict(self, a: list[str], b: list[str] | None, batch_size: int = 128) -> NDArray[np.int64]:
        return predict_classes(self.encoder, self.head, self._items(a, b, DEFAULT_MAX_LENGTH), batch_size)

    def save(self, path: Path) -> None:
        losses = self.losses_ or ([] if self.final_loss_ is None else [self.final_loss_])
        save_checkpoint(path, self.encoder, self.head, [], TrainResult(self.steps_, losses))

    def load(self, path: Path, n_classes: int) -> _FineTuned:
        self._build(n_classes)
        _, res = load_checkpoint(path, self.encoder, self.head)
        self.steps_, self.final_loss_, self.losses_ = res.steps, res.final_loss, list(res.losses)
        return self
