"""Why a row was easy: a sparse surrogate of p̃ on interpretable inputs, and a removed row's nearest kept rows.

Φ is rarely readable: MiniLM, warm-up and image embeddings are dense, and even aflite's n-gram Φ is a TruncatedSVD
of hashed TF-IDF, so the ensemble's coefficients are weights on SVD directions, not on words. For every Φ the
question "which inputs pushed the ensemble towards this row's gold label" is therefore answered by a surrogate:

* inputs: for text, one binary column per (token, label) pair — token t occurs in the row *and* the row's gold
  label is c — over the tokens of the competency table (seen ≥ min_count times) except :data:`FUNCTION_WORDS`,
  plus one column per label;
  for images, the same interaction of the label with cheap image statistics (a 4-bin histogram per RGB channel,
  mean and std of brightness, width, height and aspect ratio, each standardised);
* target: the first phase's p̃ (rows never held out are left out);
* model: an L1-penalised linear regression (scikit-learn's Lasso, coordinate descent on the sparse matrix), so
  few terms survive. A positive coefficient on (t, c) means rows of label c containing t were more predictable.

``top_features`` of a row lists its own terms with the largest positive contributions as ``name:+contribution``
separated by ``;`` (contribution = coefficient × the row's input: for a token, its coefficient). The fit's R²
on the scored rows is reported: a surrogate that explains little
of p̃ says the ensemble used something the inputs do not show.

Nearest kept neighbours: for each removed row, the kept rows closest to it in Φ (cosine similarity after a seeded
Gaussian random projection to at most 64 dimensions, which keeps the search cheap and roughly preserves angles).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

from aflite.data.images import open_image

__all__ = ["Surrogate", "fit_surrogate", "text_inputs", "image_inputs", "nearest_kept", "ngram_token_scores",
           "row_top_tokens", "IMAGE_INPUTS"]

# English function words left out of the surrogate's inputs (so of every row's top_features): articles, forms of
# "be", "have" and "do", prepositions, conjunctions, pronouns and demonstratives. They occur in most rows of any
# English set and, given the Lasso's few terms, would otherwise be the reason shown for most rows ("a", "the",
# "is"), which tells a reader nothing. Negations and quantifiers ("not", "no", "nobody", "never", "two", "some")
# are *not* in the list: they are known NLI artifacts. The token test (tokens.csv) keeps every token. Our own
# list, written for this purpose.
FUNCTION_WORDS = frozenset("""
a an the
is are was were be been being am 's 're 'm
has have had having do does did
in on at to of for with by from into onto upon over under about above below across along around through toward
towards near behind beside between among during before after off up down
and or but nor so yet as if than then while because although though
it its he she they them him her his hers their theirs we us our ours you your yours i me my mine
this that these those there here who whom whose which what
""".split())

IMAGE_INPUTS = tuple(f"hist_{c}{b}" for c in "rgb" for b in range(4)) + (
    "brightness", "brightness_std", "width", "height", "aspect")


class Term(TypedDict):
    """A surrogate's nonzero term: the input's name, the label, its coefficient and support (rows with the input
    and the label)."""

    name: str
    label: str
    coef: float
    support: int


@dataclass
class Surrogate:
    """A fitted surrogate: its nonzero terms, fit quality and per-row explanations."""

    terms: list[Term]  # by coef, descending
    r2: float
    alpha: float
    n_inputs: int
    top_features: list[str]  # per row of D


def text_inputs(B: sp.csr_matrix, vocab: NDArray[np.str_], min_count: int) -> tuple[sp.csr_matrix, NDArray[np.str_]]:
    """The token columns of the surrogate: tokens seen in at least ``min_count`` texts, except
    :data:`FUNCTION_WORDS`."""
    counts = np.asarray(B.sum(0)).ravel()
    content = np.asarray([str(t) not in FUNCTION_WORDS for t in vocab], dtype=bool)
    keep = np.flatnonzero((counts >= min_count) & content)
    return B[:, keep].astype(np.float64).tocsr(), vocab[keep]


def image_inputs(refs: Sequence[str]) -> NDArray[np.float64]:
    """Cheap, readable statistics of each image (columns :data:`IMAGE_INPUTS`), read with Pillow."""
    out = np.zeros((len(refs), len(IMAGE_INPUTS)))
    for r, ref in enumerate(refs):
        im = open_image(ref)
        w, h = im.size
        px = np.asarray(im, dtype=np.float64).reshape(-1, 3)
        hist = [np.bincount(np.minimum(px[:, c] // 64, 3).astype(np.int64), minlength=4) / len(px) for c in range(3)]
        bright = px.mean(1)
        out[r] = [*np.concatenate(hist), bright.mean(), bright.std(), w, h, w / max(h, 1)]
    return out


def _interact(F: Any, y: NDArray[np.int64], K: int) -> sp.csr_matrix:
    """Columns (input j, label c) = F[:, j] · [y == c], input-major, then one column per label."""
    F = sp.csr_matrix(F)
    n, f = F.shape
    coo = F.tocoo()
    cols = coo.col * K + y[coo.row]
    Z = sp.csr_matrix((coo.data, (coo.row, cols)), shape=(n, f * K))
    L = sp.csr_matrix((np.ones(n), (np.arange(n), y)), shape=(n, K))
    return sp.hstack([Z, L], format="csr")


def fit_surrogate(
    F: Any, names: Sequence[str], y: NDArray[np.int64], classes: Sequence[Any], target: NDArray[np.float64],
    *, alpha: float | None = None, top: int = 3, random_state: int = 0,
) -> Surrogate:
    """Fit the L1 surrogate of ``target`` (p̃) on ``F``'s columns × label; see the module docstring.

    ``alpha`` defaults to 5 / n_scored (on SNLI's 100K hypotheses about 1,200 of 6,300 terms survive, R² 0.62,
    in seconds; a ten times weaker penalty doubles the terms, gains 0.03 R² and takes minutes). Dense image
    statistics are standardised first.
    """
    from sklearn.linear_model import Lasso

    K = len(classes)
    dense = not sp.issparse(F)
    if dense:
        Fd = np.asarray(F, dtype=np.float64)
        sd = Fd.std(0)
        Fd = (Fd - Fd.mean(0)) / np.where(sd > 0, sd, 1.0)
        F = Fd
    Z = _interact(F, y, K)
    scored = np.flatnonzero(~np.isnan(target))
    f = len(names)
    if len(scored) < 2:
        return Surrogate([], float("nan"), float("nan"), f, [""] * len(y))
    a = float(alpha) if alpha is not None else 5.0 / len(scored)
    model = Lasso(alpha=a, fit_intercept=True, max_iter=2000, tol=1e-4, selection="cyclic", random_state=random_state)

    from sklearn.exceptions import ConvergenceWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # the R² below says how good the fit is
        model.fit(Z[scored], target[scored])
    coef = np.asarray(model.coef_, dtype=np.float64)
    r2 = float(model.score(Z[scored], target[scored]))
    support = np.asarray((Z[:, : f * K] != 0).sum(0)).ravel()
    nz = np.flatnonzero(coef[: f * K])
    order = nz[np.argsort(-coef[nz], kind="stable")]
    terms: list[Term] = [{"name": str(names[j // K]), "label": str(classes[j % K]), "coef": float(coef[j]),
              "support": int(support[j])} for j in order]
    contrib = Z[:, : f * K].multiply(coef[: f * K]).tocsr()
    contrib.eliminate_zeros()
    tops: list[str] = []
    indptr, indices, data = contrib.indptr, contrib.indices, contrib.data
    for i in range(len(y)):
        lo, hi = indptr[i], indptr[i + 1]
        d = data[lo:hi]
        pos = np.flatnonzero(d > 0)
        if not len(pos):
            tops.append("")
            continue
        best = pos[np.argsort(-d[pos], kind="stable")[:top]]
        tops.append(";".join(f"{names[indices[lo + b] // K]}:{d[b]:+.3g}" for b in best))
    return Surrogate(terms, r2, a, f, tops)


def nearest_kept(
    X: Any, keep: NDArray[np.bool_], k: int = 3, dim: int = 64, seed: int = 0, chunk: int = 512
) -> list[list[int]]:
    """For every removed row, the positions of its ``k`` most cosine-similar kept rows in Φ (after a seeded
    random projection to ``dim`` dimensions when Φ is wider); an empty list for kept rows."""
    n, d = X.shape
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 2]))
    proj = rng.normal(size=(d, dim)).astype(np.float32) / np.sqrt(dim) if d > dim else None

    def embed(rows: NDArray[np.intp]) -> NDArray[np.float32]:
        out: list[NDArray[np.float32]] = []
        for r0 in range(0, len(rows), 8192):
            A = np.asarray(X[rows[r0 : r0 + 8192]], dtype=np.float32)
            A = A @ proj if proj is not None else A
            out.append(A / np.maximum(np.linalg.norm(A, axis=1, keepdims=True), 1e-12))
        return np.concatenate(out) if out else np.zeros((0, min(d, dim)), np.float32)

    kept = np.flatnonzero(keep)
    removed = np.flatnonzero(~keep)
    result: list[list[int]] = [[] for _ in range(n)]
    if not len(kept) or not len(removed):
        return result
    Ek = embed(kept)
    Er = embed(removed)
    kk = min(k, len(kept))
    for r0 in range(0, len(removed), chunk):
        S = Er[r0 : r0 + chunk] @ Ek.T
        at = np.arange(len(S))
        best = np.empty((len(S), kk), dtype=np.intp)
        for j in range(kk):  # k arg-max passes: far cheaper than a partial sort for a small k
            best[:, j] = S.argmax(1)
            S[at, best[:, j]] = -np.inf
        for j, row in enumerate(removed[r0 : r0 + chunk]):
            result[row] = kept[best[j]].tolist()
    return result


def ngram_token_scores(feat: Any, tokens: Sequence[str], second: bool, coef: NDArray[np.float64], *,
                       pair: bool) -> NDArray[np.float64]:
    """For an n-gram Φ, each token's push towards each label read from the ensemble's own weights: Φ of the token
    alone (for a pair, in the second field when ``second``, else the first, the other field empty) times the first
    phase's mean coefficients (``AFLite.first_phase_coef_``, centred over labels). Shape (tokens, labels)."""
    toks = list(tokens)
    empty = [""] * len(toks)
    if pair:
        Phi = feat.transform(empty, toks) if second else feat.transform(toks, empty)
    else:
        Phi = feat.transform(toks)
    Phi = Phi.toarray() if hasattr(Phi, "toarray") else np.asarray(Phi)
    return np.asarray(Phi, dtype=np.float64) @ np.asarray(coef, dtype=np.float64).T


def row_top_tokens(B: sp.csr_matrix, scores: NDArray[np.float64], y: NDArray[np.int64], names: Sequence[str],
                   top: int = 3) -> list[str]:
    """Per row, its tokens (columns of B, aligned with ``scores``) with the largest positive score for the row's
    gold label, as ``token:+score;...``."""
    out: list[str] = []
    indptr, indices = B.indptr, B.indices
    for i in range(B.shape[0]):
        cols = indices[indptr[i] : indptr[i + 1]]
        s = scores[cols, y[i]]
        pos = np.flatnonzero(s > 0)
        best = pos[np.argsort(-s[pos], kind="stable")[:top]]
        out.append(";".join(f"{names[cols[b]]}:{s[b]:+.3g}" for b in best))
    return out
