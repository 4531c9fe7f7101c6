"""A page's rows and plots' data: the per-row table's columns made compact (ids, labels, p̃, removal phase;
explain's data-map columns; any other column shown as it is), the texts from the dataset the run read (in memory,
or the file it recorded, checked against its fingerprint), the warm-up slice, the token test's competency plot and
evaluate's accuracies.

The same functions serve the page a command writes from its result in memory and the page ``aflite report``
rebuilds from the verified folder (:mod:`aflite.report.pages`), so both are the same page.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal, NotRequired, TypedDict

import numpy as np

from aflite.data import load_dataset
from aflite.errors import InputError
from aflite.hashing import dataset_fingerprint
from aflite.rundir.schema import EvaluateBody

TEXT_LIMIT = 400  # characters of each text kept for the table (the full row is in the dataset file)
TOKEN_POINTS = 4000  # tokens per set drawn on the competency plot (every significant one, then the most frequent)


def _float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        return math.nan
    return v


def _checked(path: Path, column: str, values: list[str], ok: Any, what: str) -> None:
    """Refuse, naming the line and column, the first value of ``column`` that ``ok`` rejects."""
    for lineno, v in enumerate(values, start=2):
        if not ok(v):
            raise InputError(f"{path}: line {lineno}, column {column!r}: {v[:40]!r} is not {what}")


def _is_int(v: str) -> bool:
    return v.strip().lstrip("-").isdigit()


def _is_unit_or_empty(v: str) -> bool:
    if not v.strip():
        return True
    try:
        return 0.0 <= float(v) <= 1.0
    except ValueError:
        return False


def _milli(values: list[float]) -> list[int]:
    """Floats in [0, 1] as integers in thousandths (-1: missing): the page's compact column."""
    return [-1 if math.isnan(v) else int(round(1000 * v)) for v in values]


def _codes(values: list[str]) -> tuple[list[int], list[str]]:
    names = sorted(set(values))
    idx = {n: k for k, n in enumerate(names)}
    return [idx[v] for v in values], names


class GenericColumn(TypedDict):
    """A column the page shows as it is: its name, whether it is numeric, its cells."""

    name: str
    num: bool
    v: list[float | str | None]  # numbers (null: an empty cell) or texts, never both


class PageColumns(TypedDict, total=False):
    """The rows' columns as the page's script reads them (compact: label and region as codes into their names,
    p̃, confidence, variability and correctness in thousandths, -1 missing); only ``id`` is always there."""

    id: list[str]
    label: list[int]
    labels: list[str]
    p: list[int]
    phase: list[int]
    conf: list[int]
    var: list[int]
    correct: list[int]
    region: list[int]
    regions: list[str]
    issue: list[int]
    top: list[str]
    more: list[GenericColumn]
    w: list[float | None]  # explain's soft weights
    w_name: str
    ta: list[str]  # the rows' texts (or image files), cut to TEXT_LIMIT
    tb: list[str]
    thumb: dict[str, str]  # row -> data URI of its thumbnail (images: the sampled rows)


_PADDED = Literal["p", "phase", "conf", "var", "correct", "issue"]

class TokenRow(TypedDict):
    """One row of explain's token test, as the competency plot reads it."""

    token: str
    label: str
    count: int
    p: float
    z: float
    sig: bool


class BonferroniCurve(TypedDict):
    """One label's significance curve on the competency plot: base rate ``p0``, counts ``n`` and the bound ``p``."""

    p0: float
    n: list[float]
    p: list[float]


class TokenSet(TypedDict):
    """One set's points and curves on the competency plot."""

    tokens: list[TokenRow]
    n_tests: int
    n_significant: int
    z_crit: float
    curves: dict[str, BonferroniCurve]


class TokenPlot(TypedDict):
    """The competency plot's data: the family-wise α and each set's points and curves."""

    alpha: float
    sets: dict[str, TokenSet]


MAPPED = frozenset({"id", "label", "predictability", "removed_at", "kept", "confidence", "variability", "correctness",
                    "region", "label_issue", "top_features"})  # the columns the page draws in its own way


def table_columns(columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> dict[str, list[str]]:
    """A per-row table in memory (:class:`aflite.rundir.results.Table`) as the columns of strings its CSV holds
    (a cell as ``csv`` writes it: None empty, anything else ``str``), so that the page built from a result in
    memory is the page built from its folder."""
    cols: dict[str, list[str]] = {name: [] for name in columns}
    lists = [cols[name] for name in columns]
    for row in rows:
        for lst, value in zip(lists, row, strict=True):
            lst.append("" if value is None else str(value))
    return cols


def instance_columns(cols: dict[str, list[str]], path: Any, known: Iterable[str] = ()) -> PageColumns:
    """The page's columns (codes, thousandths) from a per-row table's columns of strings; ``path`` names the table
    in errors. A column the page does not draw in its own way (:data:`MAPPED`) and the command does not list in
    ``known`` (its own columns the page leaves out) is shown as it is (:func:`generic_column`): a check's column
    reaches the page with no edit here."""
    # every column the page reads is checked: a value it cannot read is an error, never a "kept" or a blank
    if "removed_at" in cols:
        _checked(path, "removed_at", cols["removed_at"], lambda v: _is_int(v) and int(v) >= -2,
                 "a phase number (-1: kept)")
    if "kept" in cols:
        _checked(path, "kept", cols["kept"], lambda v: v.strip() in ("0", "1"), "0 or 1")
    for name in ("predictability", "confidence", "variability", "correctness"):
        if name in cols:
            _checked(path, name, cols[name], _is_unit_or_empty, "a number in [0, 1] (or empty)")
    out = PageColumns(id=cols["id"])  # the page's columns, as its script reads them
    out["label"], out["labels"] = _codes(cols.get("label", [""] * len(cols["id"])))
    if "predictability" in cols:
        out["p"] = _milli([_float(v) for v in cols["predictability"]])
    if "removed_at" in cols:
        out["phase"] = [int(v) for v in cols["removed_at"]]
    elif "kept" in cols:
        out["phase"] = [-1 if v == "1" else 0 for v in cols["kept"]]
    thousandths: tuple[tuple[str, Literal["conf", "var", "correct"]], ...] = (
        ("confidence", "conf"), ("variability", "var"), ("correctness", "correct"))
    for src, dst in thousandths:
        if src in cols:
            out[dst] = _milli([_float(v) for v in cols[src]])
    if "region" in cols:
        out["region"], out["regions"] = _codes(cols["region"])
    if "label_issue" in cols:
        out["issue"] = [1 if v.strip().lower() in ("1", "true", "yes") else 0 for v in cols["label_issue"]]
    if "top_features" in cols:
        out["top"] = [v[:TEXT_LIMIT] for v in cols["top_features"]]
    leave = MAPPED | set(known)
    more = [generic_column(name, values) for name, values in cols.items() if name not in leave]
    if more:
        out["more"] = more
    return out


def generic_column(name: str, values: list[str]) -> GenericColumn:
    """A column shown as it is: numbers (``num``; empty cells null) when every non-empty cell is one, else text
    cut to TEXT_LIMIT characters (the page's script sets it as text, never as markup)."""
    numbers: list[float | str | None] = [None if not v.strip() else _float(v) for v in values]
    if any(x is not None for x in numbers) and not any(isinstance(x, float) and math.isnan(x) for x in numbers):
        return {"name": name, "num": True, "v": numbers}
    return {"name": name, "num": False, "v": [v[:TEXT_LIMIT] for v in values]}


def add_weights(cols: PageColumns, path: Path, notes: list[str]) -> None:
    """explain's weights.csv (id and a weight per row) as a column, matched by id; left out with a note when
    its ids are not the table's."""
    if not path.is_file():
        return
    with path.open(encoding="utf-8", newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader, [])
        if len(header) < 2 or header[0] != "id":
            notes.append(f"Weights not shown: {path.name} has no id column first.")
            return
        col = header.index("weight") if "weight" in header else 1  # explain writes id,label,weight,...
        weight = {row[0]: _float(row[col]) for row in reader if len(row) > col}
    if len(weight) != len(cols["id"]) or any(i not in weight for i in cols["id"]):
        notes.append(f"Weights not shown: the ids of {path.name} are not the table's.")
        return
    cols["w"] = [None if math.isnan(weight[i]) else round(weight[i], 4) for i in cols["id"]]
    cols["w_name"] = header[col]


def weights_column(cols: PageColumns, weights: list[str], name: str = "weight") -> None:
    """The rows' soft weights (cells of explain's ``weight`` column, in the table's order) as the page's column."""
    values = [_float(v) for v in weights]
    cols["w"] = [None if math.isnan(v) else round(v, 4) for v in values]
    cols["w_name"] = name


COLUMN_OPTIONS = ("text_a", "text_b", "label", "id_column")  # what the page needs to read the rows back



def dataset_at(path: str | None, recorded: dict[str, str] | None, relative: str | None,
               folder: str | Path | None = None) -> tuple[str | None, dict[str, str]]:
    """The dataset file a command read and the column options it was read with, from the typed keys of its
    results.json body (``dataset``, ``dataset_options``, ``dataset_relative``; never parsed from its argv). With
    ``folder`` (the folder whose results.json this is) the path is located as :func:`locate` does, not against the
    current directory."""
    recorded = recorded or {}
    opts = {key: recorded[key] for key in COLUMN_OPTIONS if isinstance(recorded.get(key), str)}
    if folder is not None and path:
        found = locate(folder, str(path), relative)
        path = str(found) if found is not None else path
    return (str(path) if path else None), opts


def locate(folder: str | Path, recorded: str | None, relative: str | None) -> Path | None:
    """Where a path a command recorded is from here: as recorded (aflite records resolved paths), else relative to
    ``folder`` (``relative``: the path from the folder, recorded beside it: the folder and its data moved
    together). None when neither exists."""
    cands = []
    if recorded and Path(recorded).is_absolute():
        cands.append(Path(recorded))
    if relative:
        cands.append(Path(folder) / relative)
    return next((c for c in cands if c.exists()), None)


def load_rows_dataset(dataset: Any | None, path: str | None, options: dict[str, str], notes: list[str],
                      fingerprint: str | None = None) -> Any:
    """The dataset whose rows the page shows: ``dataset`` when given, else the file at ``path`` loaded again with
    ``options`` and checked against the ``fingerprint`` the run recorded; None (with a note saying why) when it
    cannot be read from here or is not the file the run read."""
    if dataset is not None or not path:
        return dataset
    if not Path(path).exists():
        notes.append(f"Texts not shown: the run read {path}; no file holds its rows." if path.startswith("in-memory ")
                     else f"Texts not shown: the dataset file {path} is not found from here.")
        return None
    try:
        ds = load_dataset(path, text_a=options.get("text_a"), text_b=options.get("text_b"),
                          label=options.get("label"), id_column=options.get("id_column"))
    except Exception as exc:  # noqa: BLE001 - the page is still useful without texts; say why they are absent
        notes.append(f"Texts not shown: {path} could not be read again ({exc}).")
        return None
    if fingerprint:
        if dataset_fingerprint(ds.ids, ds.labels, ds.texts_a, ds.texts_b) != fingerprint:
            notes.append(f"Texts not shown: {path} is not the file the run read (its ids, labels or texts differ).")
            return None
    return ds


WARMUP = -2  # phase code of a warm-up row: it trained Φ and was then left out of the filter (the paper's protocol)


def add_warmup(cols: PageColumns, dataset: Any, ids: list[str]) -> None:
    """Append the warm-up rows (``warmup_ids.txt``) to the table, labelled from the dataset, phase WARMUP."""
    lab_of = dict(zip(np.asarray(dataset.ids).astype(str), np.asarray(dataset.labels).astype(str), strict=True))
    ids = [i for i in ids if i in lab_of]
    labels = list(cols["labels"])
    for i in ids:
        name = lab_of[i]
        if name not in labels:
            labels.append(name)
        cols["label"].append(labels.index(name))
    cols["labels"] = labels
    cols["id"] = list(cols["id"]) + ids
    pads: tuple[tuple[_PADDED, int], ...] = (("p", -1), ("phase", WARMUP), ("conf", -1), ("var", -1),
                                              ("correct", -1), ("issue", 0))
    for key, fill in pads:
        if key in cols:
            cols[key] = list(cols[key]) + [fill] * len(ids)
    if "top" in cols:
        cols["top"] = list(cols["top"]) + [""] * len(ids)
    for more in cols.get("more", []):
        more["v"] = list(more["v"]) + [None if more["num"] else ""] * len(ids)
    if "region" in cols:
        if "" not in cols["regions"]:
            cols["regions"] = [*cols["regions"], ""]
        cols["region"] = list(cols["region"]) + [cols["regions"].index("")] * len(ids)


def attach_texts(cols: PageColumns, dataset: Any | None, notes: list[str], where: str = "the dataset") -> None:
    """Add the rows' texts (cut to TEXT_LIMIT characters) from ``dataset``; ids that are not all in it leave
    the texts out, with a note saying why."""
    if dataset is None:
        return
    row_of = {str(i): r for r, i in enumerate(np.asarray(dataset.ids).astype(str))}
    rows = [row_of.get(i, -1) for i in cols["id"]]
    missing = sum(r < 0 for r in rows)
    if missing:
        notes.append(f"Texts not shown: {missing:,} of the run's ids are not in {where}.")
        return
    cols["ta"] = [str(dataset.texts_a[r])[:TEXT_LIMIT] for r in rows]
    if dataset.texts_b is not None:
        cols["tb"] = [str(dataset.texts_b[r])[:TEXT_LIMIT] for r in rows]


def token_plot(records: Iterable[dict[str, str]], alpha: float, path: Any) -> TokenPlot:
    """explain's token test (rows as tokens.csv holds them, from the file or from memory) for the competency
    plot: per set, the most frequent tokens and every significant one, and per label the Bonferroni curve
    p*(n) = p0 + z*·sqrt(p0(1 − p0)/n), z* the one-sided critical z at α / (number of tests in the set), p0 the
    label's base rate solved back from the rows' z. ``path`` names the rows in errors."""
    from scipy.stats import norm

    sets: dict[str, list[TokenRow]] = {}
    for lineno, rec in enumerate(records, start=2):
        try:
            sets.setdefault(rec["set"], []).append({
                "token": rec["token"], "label": rec["label"], "count": int(float(rec["count"])),
                "p": float(rec["p_label"]), "z": _float(rec.get("z", "")),
                "sig": str(rec.get("significant", "")).strip().lower() in ("1", "true", "yes")})
        except (KeyError, ValueError) as exc:
            raise InputError(f"{path}: line {lineno}: {exc}") from None
    out = TokenPlot(alpha=alpha, sets={})
    for name, rows in sets.items():
        n_tests = len(rows)
        zcrit = float(norm.isf(alpha / max(1, n_tests)))
        rows.sort(key=lambda r: (not r["sig"], -r["count"]))
        shown = rows[:TOKEN_POINTS]
        curves: dict[str, BonferroniCurve] = {}
        for label in sorted({r["label"] for r in rows}):
            p0 = _base_rate([r for r in rows if r["label"] == label])
            if p0 is None:
                continue
            counts = np.unique(np.geomspace(max(1, min(r["count"] for r in rows)),
                                            max(r["count"] for r in rows), 60).round())
            curves[label] = BonferroniCurve(p0=p0, n=counts.tolist(),
                                            p=[min(1.0, p0 + zcrit * math.sqrt(p0 * (1 - p0) / c)) for c in counts])
        out["sets"][name] = TokenSet(tokens=shown, n_tests=n_tests, n_significant=sum(r["sig"] for r in rows),
                                     z_crit=zcrit, curves=curves)
    return out


def _base_rate(rows: list[TokenRow]) -> float | None:
    """p0 of one label, solved from each row's (p̂, n, z) with z = (p̂ − p0) / sqrt(p0(1 − p0)/n); the median."""
    est = []
    for r in rows[:500]:
        z, p, n = r["z"], r["p"], r["count"]
        if math.isnan(z) or n <= 0:
            continue
        a = z * z / n
        # (p − p0)² = a·p0(1 − p0)  →  (1 + a)p0² − (2p + a)p0 + p² = 0; the root on the side z says
        disc = (2 * p + a) ** 2 - 4 * (1 + a) * p * p
        if disc < 0:
            continue
        roots = [((2 * p + a) - math.sqrt(disc)) / (2 * (1 + a)), ((2 * p + a) + math.sqrt(disc)) / (2 * (1 + a))]
        cand = [q for q in roots if 0 < q < 1 and (q <= p if z >= 0 else q >= p)]
        if cand:
            est.append(cand[0] if z >= 0 else cand[-1])
    return float(np.median(est)) if est else None


class AccuracyBar(TypedDict):
    """One bar of the accuracy plot: a model on a training set, mean ± std over seeds, next to chance."""

    model: str
    set: str
    mean: float
    std: float
    chance: float | None


class LossSeries(TypedDict):
    """One fine-tuned model's training-loss curve on the loss plot (``step`` and ``loss`` of the same length)."""

    model: str | None
    set: str | None
    seed: int | None
    step: list[int]
    loss: list[float]
    not_trained: bool


class LrCandidatePlot(TypedDict):
    """One rate of the learning-rate check: its held-out accuracy and loss curve."""

    lr: float | None
    accuracy: float | None
    step: list[int]
    loss: list[float]


class LrCheckPlot(TypedDict):
    """The learning-rate check's plot: the rate chosen, its (train, held-out) rows and every candidate."""

    chosen: float | None
    rows: list[int | None]
    candidates: list[LrCandidatePlot]


class AccuracyPlot(TypedDict):
    """evaluate's plots: the bars, the training sets in order, D's chance line, where the accuracy was measured,
    the loss curves and the learning-rate check (None: none ran)."""

    bars: list[AccuracyBar]
    sets: list[str]
    chance: float | None
    where: str
    losses: list[LossSeries]
    lr_check: LrCheckPlot | None


class PagePlots(TypedDict, total=False):
    """The page's plots' data: a run's phases and label mix, explain's competency plot, evaluate's accuracies."""

    history: list[dict[str, float | dict[str, float]]]  # the run's phases, as results.json's iterations
    label_counts_before: dict[str, int]
    label_counts_after: dict[str, int]
    tokens: TokenPlot
    accuracy: AccuracyPlot


class PageJson(TypedDict):
    """What a page embeds for its script (:class:`aflite.rundir.page.PageData`'s ``data``): which page, the plots'
    data and, on a page with a rows table, the rows' columns."""

    kind: str  # run, explain, evaluate, or a command of one's own
    plots: PagePlots
    cols: NotRequired[PageColumns]


def read_evaluate(body: EvaluateBody) -> AccuracyPlot:
    """Accuracy per model and training set on the own held-out split (mean ± std over seeds) — or, when D was
    not split, on the first test set — each with its chance (the majority-class rate of the same rows), and D's
    majority rate for the chance line; the training-loss curve of every fine-tuned model (``losses``) and the
    learning-rate check's candidates (``lr_check``)."""
    config = body.config
    sets: list[str] = list(dict.fromkeys(si["name"] for si in body.training_sets))
    tests = [t.get("name") for t in config.get("tests") or [] if t.get("name")]
    bars: list[AccuracyBar] = []
    where = None
    for model, per_set in body.aggregate.items():
        for name in sets:
            entry = per_set.get(name) or {}
            ms = entry.get("own_heldout") or {}
            maj = (entry.get("own_heldout_majority") or {}).get("mean")
            if ms.get("mean") is None and tests:  # --no-split: the first test set
                t = (entry.get("tests") or {}).get(tests[0]) or {}
                ms, maj = t.get("accuracy") or {}, t.get("majority")
                where = tests[0]
            if ms.get("mean") is not None:
                bars.append({"model": model, "set": name, "mean": ms["mean"], "std": ms.get("std") or 0.0,
                             "chance": maj})
    chance = None
    for si in body.training_sets:
        counts = si.get("label_counts") or {}
        if si.get("kind") == "D" and counts:
            chance = max(counts.values()) / max(1, sum(counts.values()))
    if where is not None:
        chance = next((t.get("majority", chance) for t in config["tests"] if t.get("name") == where), chance)
    losses: list[LossSeries] = [{"model": r.get("model"), "set": r.get("train_set"), "seed": r.get("seed"),
               "step": r["loss_curve"].get("step") or [], "loss": r["loss_curve"].get("loss") or [],
               "not_trained": bool(r.get("not_trained"))}
              for r in body.runs if isinstance(r.get("loss_curve"), dict)]
    check = (config.get("finetune") or {}).get("lr_check")
    lr_check: LrCheckPlot | None = None
    if isinstance(check, dict) and check.get("candidates"):
        lr_check = {"chosen": check.get("chosen"), "rows": [check.get("train_rows"), check.get("heldout_rows")],
                    "candidates": [{"lr": c.get("lr"), "accuracy": c.get("accuracy"),
                                    "step": (c.get("loss_curve") or {}).get("step") or [],
                                    "loss": (c.get("loss_curve") or {}).get("loss") or []}
                                   for c in check["candidates"]]}
    return {"bars": bars, "sets": sets, "chance": chance, "where": where or "own held-out",
            "losses": losses, "lr_check": lr_check}
