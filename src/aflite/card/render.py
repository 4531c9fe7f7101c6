"""The dataset card itself (``README.md``): YAML front matter for the Hugging Face Hub and a Markdown body, both
written from the manifest alone (:mod:`aflite.card.facts`), so that the card and ``manifest.json`` cannot
disagree.

Figures are formatted, never computed: counts with thousands separators, accuracies (fractions in results.json)
as percentages with one decimal, shares (already percentages there) with one decimal, hashes in full.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from aflite.card import schema as cs
from aflite.card.facts import GIVEN_LICENSE, memory_kind
from aflite.card.frontmatter import dump
from aflite.commands.summary_md import warmup_line
from aflite.rundir.evaluate_records import MeanStd

__all__ = ["code", "front_matter", "render_card", "text"]

FOLDER_SHA = ", a folder: over each file's path and sha256, in sorted order (aflite.hashing.file_sha256)"
TAGS = ["aflite", "adversarial-filtering", "dataset-artifacts"]
Kind = Literal["own_heldout", "original_heldout", "tests", "external"]  # an evaluation's kind in the scores
PARAMETERS = (("n", "target_size", "target size"), ("m", "n_partitions", "linear models per phase"),
              ("t", "train_size", "training rows per model"), ("k", "slice_size", "rows removed per phase at most"),
              ("τ", "threshold", "predictability threshold"), ("strategy", "strategy", "how a phase removes rows"),
              ("model", "model", "the ensemble's classifier"), ("C", "C", "its inverse regularization"))


def front_matter(m: cs.CardManifest) -> cs.FrontMatter:
    """The card's metadata as the Hub reads it (``configs`` points at the filtered data file)."""
    out = m["output"]
    meta: cs.FrontMatter = {"license": m["license"]["id"]}
    name = m["license"].get("name")
    if m["license"]["id"] == "other" and name:
        meta["license_name"] = name
    meta["pretty_name"] = m["name"]
    language = m.get("language")
    if language:
        meta["language"] = language
    meta["task_categories"] = m["task_categories"]
    if m.get("task_ids"):
        meta["task_ids"] = m["task_ids"]
    meta["size_categories"] = [m["size_category"]]
    meta["source_datasets"] = m["source_datasets"]
    meta["tags"] = TAGS
    data = out["data"]
    path = f"{data['file']}/*.arrow" if data["format"] == "arrow" else data["file"]
    columns = data.get("columns")
    if columns:  # every cell as text, as written (an id 007 stays "007", a text "NA" stays "NA")
        meta["dataset_info"] = {"features": [{"name": c, "dtype": "string"} for c in columns]}
    meta["configs"] = [{"config_name": "default", "data_files": [{"split": "train", "path": path}]}]
    return meta


# ---------------------------------------------------------------------------------------------- formatting
_TAG_START = re.compile(r"<(?=[A-Za-z/!?])")  # where CommonMark starts raw HTML or an autolink
_ENTITY = re.compile(r"&(?=#?\w+;)")  # where it reads a character reference


def code(value: Any) -> str:
    """``value`` as one CommonMark code span, whatever it holds: fenced by one backtick more than its longest run
    of backticks (padded with a space where it starts or ends with one), on one line — so that a label such as
    ``a`<b>`` stays inside the span, where Markdown shows HTML as text."""
    s = " ".join(str(value).splitlines()) or " "
    fence = "`" * (max((len(r) for r in re.findall(r"`+", s)), default=0) + 1)
    pad = " " if s[0] == "`" or s[-1] == "`" or (s[0] == " " and s[-1] == " " and s.strip()) else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def text(value: Any) -> str:
    """Text from the data or the folders (a verdict naming a label, a title) as Markdown prose: a ``<`` that
    would open raw HTML and an ``&`` that would read as an entity are backslash-escaped, so the text shows as
    written; anything else stays as it is."""
    s = " ".join(str(value).splitlines())
    return _ENTITY.sub(r"\\&", _TAG_START.sub(r"\\<", s))


def num(n: Any) -> str:
    """A count with thousands separators (a whole float, e.g. a JSON 133.0, as 133; a mean as it is)."""
    if n is None:
        return "–"
    if isinstance(n, float) and n.is_integer():
        n = int(n)
    return f"{n:,}" if isinstance(n, int) and not isinstance(n, bool) else str(n)


def pct(x: Any) -> str:
    """A fraction as a percentage, one decimal."""
    return "–" if x is None else f"{100 * float(x):.1f}"


def _stat(ms: MeanStd | None) -> str:
    """``{mean, std, n}`` (fractions) as ``53.5`` or ``51.7 ± 1.3`` (std over n > 1 seeds)."""
    if not ms or ms.get("mean") is None:
        return "–"
    return pct(ms["mean"]) + (f" ± {pct(ms['std'])}" if (ms.get("n") or 0) > 1 and ms.get("std") is not None else "")


def _value(v: Any) -> str:
    return f"{code(v)}" if isinstance(v, str) else f"{code(json.dumps(v, ensure_ascii=False, sort_keys=True))}"


def source_text(src: cs.InputFacts) -> str:
    """The input as the card names it: its file, or for data given in memory what it was (``a pandas DataFrame
    given to aflite.run``), not the placeholder name the run recorded."""
    if src.get("in_memory"):
        return f"a {memory_kind(str(src['file']))} given to `aflite.run` (no file)"
    return code(src["file"])


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + ["| " + " | ".join(
        c.replace("|", "\\|") for c in r) + " |" for r in rows]


# ---------------------------------------------------------------------------------------------- sections
def _data(m: cs.CardManifest) -> list[str]:
    src, out, lic = m["input"], m["output"], m["license"]
    kept = out["kept_ids"]
    data = out["data"]
    if data["format"] == "arrow":
        made = f"a copy of the run folder's saved dataset {code(out['file'])}"
    else:
        kind = "every column a string, each cell as written" if data.get("columns") else "the input's typed columns"
        made = (f"Parquet ({kind}), made from the run folder's {code(out['file'])} (sha256 {code(out['sha256'])}"
                f"{FOLDER_SHA if out.get('is_folder') else ''})")
    lines = ["## Data", "",
             f"- **File:** {code(data['file'])} ({num(out['rows'])} rows): {made}; the front matter's `configs` "
             f"names it, so that `datasets.load_dataset` reads this folder as it is; its sha256 is in `manifest.json`.",
             f"- **Kept ids:** {code(kept['file'])} ({num(kept['ids'])} ids; sha256 {code(kept['sha256'])})."]
    warm = out.get("warmup_ids")
    if warm:
        lines.append(f"- **Warm-up ids** (rows that fine-tuned Φ, not in D(Φ)): {code(warm['file'])} "
                     f"(sha256 {code(warm['sha256'])}).")
    sha = f"sha256 {code(src['sha256'])}{FOLDER_SHA if src.get('is_folder') else ''} ({src['sha256_source']})"
    lines.append(f"- **Source:** {source_text(src)}" + (f", {text(m['title'])}" if m.get("title") else "")
                 + f": {num(src['rows'])} rows; {sha}; dataset fingerprint {code(src['dataset_fingerprint'])}.")
    if lic["id"] == "unknown":
        lines.append(f"- **License:** `unknown` — {lic['source']}.")
    else:
        named = (f" ({text(lic['name'])}" + (f", {lic['url']}" if lic.get("url") else "") + ")"
                 if lic.get("name") else "")
        given = lic["source"] == GIVEN_LICENSE
        keeps = " D(Φ) is a subset of the input and keeps its license." if not given \
            else " aflite does not know the input's license: check that this one allows publishing the subset."
        origin = "as given (`--license`; `license=` in Python)" if given else f"from {text(lic['source'])}"
        lines.append(f"- **License:** {code(lic['id'])}{named}, {origin}.{keeps}")
    if lic.get("attribution"):
        lines.append(f"- **Attribution** (the source's citation): {text(lic['attribution'])}")
    return lines + [""]


def _how(m: cs.CardManifest) -> list[str]:
    phi, flt = m["phi"], m["filter"]
    p = flt.get("parameters") or {}
    lines = ["## How D(Φ) was made", "",
             "AFLite (Le Bras et al., 2020, *Adversarial Filters of Dataset Biases*, Algorithm 1): in each phase, "
             "m linear models are trained on random t-row partitions over frozen features Φ(x); each row's "
             "predictability p̃ is the share of the models that held it out and predicted its label; up to k rows "
             "with p̃ >= τ are removed, until n rows are left or fewer than k qualify.", "",
             "### Φ", "",
             f"- **Featurizer:** {code(phi['featurizer'])}, view {code(phi['view'])}, {num(phi['dim'])} dimensions."]
    model = phi.get("model")
    if model:
        where = model.get("folder") or model.get("embeddings") or model.get("name")
        pkg = (f", from the package {code(model['package'])} {model['package_version']}" if model.get("package")
               else "")
        lines.append(f"- **Model:** {code(where)}{pkg}" + ("" if model.get("found", True) else
                                                       " (not found when the card was made)") + ".")
        for name, digest in sorted((model.get("files_sha256") or {}).items()):
            lines.append(f"  - {code(name)} sha256 {code(digest)} (when the card was made)")
    if phi.get("warmup_rows"):
        lines.append(f"- **Warm-up:** Φ was fine-tuned on {num(phi['warmup_rows'])} rows (the warm-up slice, seed "
                     f"{flt.get('seed')}) and those rows were discarded"
                     + warmup_line(phi.get("warmup_training") or {}, "; the ") + ".")
    lines += ["", *_table(["option", "value"], [[f"{code(k)}", _value(v)] for k, v in sorted(phi["options"].items())]),
              "", "### Filter", "",
              *_table(["parameter", "value", "meaning"],
                      [[f"{sym} ({code(key)})", _value(p.get(key)), what] for sym, key, what in PARAMETERS if key in p]
                      + [["groups", _value(flt.get("groups")), "rows of one group stay on one side of every split"],
                         ["seed", _value(flt.get("seed")), "the one seed every random choice flows from"]]),
              ""]
    if flt.get("overrides"):
        lines += [f"Set by hand (the rest are Table 8's SNLI values scaled to |D|): "
                  f"{', '.join(f'{code(k)}' for k in sorted(flt['overrides']))}.", ""]
    v = m.get("versions") or {}
    lines += [f"- **Versions:** {', '.join(f'{k} {v[k]}' for k in sorted(v) if k != 'platform')}"
              + (f"; platform {code(v['platform'])}" if v.get("platform") else "") + ".",
              f"- **Card:** written by {m['generator']['tool']} (aflite {m['generator']['aflite']}) from the run's "
              f"results.json; `manifest.json` holds the same facts.", ""]
    return lines


def _changed(m: cs.CardManifest) -> list[str]:
    flt, lab = m["filter"], m["labels"]
    sizes = " → ".join(num(s) for s in flt.get("sizes") or [])
    lines = ["## What filtering changed", "",
             f"- **Size:** |D| = {num(flt['size_before'])} → |D(Φ)| = {num(flt['size_after'])} rows in "
             f"{num(flt.get('n_iterations'))} phase(s): {sizes}.",
             f"- **Stop reason:** {text(flt.get('stop_reason'))}.", ""]
    if m.get("verdict"):
        lines += ["The run's verdict:", "", *[f"> {text(s)}" for s in m["verdict"]], ""]
    shift = cs.label_shift(m)
    before, after = lab.get("before") or {}, lab.get("after") or {}
    rows = [[f"{code(k)}", num(before.get(k)), f"{shift.shares_before[k]:.1f}", num(after.get(k)),
             f"{shift.shares_after[k]:.1f}", f"{shift.change_points[k]:+.1f}"] for k in sorted(before)] \
        if shift else []
    lines += ["### Label shift", "",
              *_table(["label", "D rows", "D share %", "D(Φ) rows", "D(Φ) share %", "change (points)"], rows), ""]
    probe = cs.probe_record(m)
    if probe and probe.results:
        lines += ["### The run's probe", "", f"{probe.model}; 5-fold cross-validation accuracy on each set "
                  "and the majority-class rate of its rows (chance):", "",
                  *_table(["set", "rows", "accuracy %", "± (std)", "majority %", "lead over majority (points)"],
                          [[text(r.name), num(r.size), pct(r.accuracy), pct(r.accuracy_std), pct(r.majority),
                            "–" if r.delta_majority is None else f"{100 * r.delta_majority:+.1f}"]
                           for r in probe.results]),
                  "", text(probe.meaning), ""]
    elif probe and probe.skipped:
        lines += ["### The run's probe", "", f"Skipped: {probe.skipped}.", ""]
    return lines


def _evaluations(ev: cs.EvaluateFacts) -> list[tuple[str, Kind, str]]:
    """(title, kind, name) of every evaluation with figures: own / original held-out, tests, external sets."""
    out: list[tuple[str, Kind, str]] = []
    if ev.get("split"):
        out += [("D's held-out part: each training set's own rows", "own_heldout", ""),
                ("the whole held-out part of D (the original distribution)", "original_heldout", "")]
    out += [(f"test set {code(t['name'])}", "tests", t["name"]) for t in ev.get("tests") or []]
    out += [(f"evaluation set {code(t['name'])}", "external", t["name"]) for t in ev.get("eval_sets") or []]
    return out


def _cell(entry: cs.SetScore | None, kind: Kind, name: str) -> str:
    if entry is None:
        return "–"
    if kind == "own_heldout" or kind == "original_heldout":
        return _stat(entry.get(kind))
    score = (entry.get(kind) or {}).get(name)
    return _stat(score.get("accuracy") if score else None)


def _chance(entry: cs.SetScore | None, kind: Kind, name: str) -> str:
    if entry is None:
        return "–"
    if kind == "own_heldout":
        return _stat(entry.get("own_heldout_majority"))
    if kind == "original_heldout":
        return _stat(entry.get("original_heldout_majority"))
    score = (entry.get(kind) or {}).get(name)
    maj = score.get("majority") if score else None
    return _stat(maj) if isinstance(maj, dict) else pct(maj)


# the training sets a card's evaluation may hold, in its tables' order, and how its intro names each
ROLES = {"D": "D", "random": "same-size random subsets of D",
         "label-matched random": "same-size random subsets with D(Φ)'s label counts (--label-matched)",
         "single-iteration": "the single-iteration cut (one model, one pass)", "filtered": "D(Φ)"}


def _evaluate(ev: cs.EvaluateFacts) -> list[str]:
    sets = ev["sets"]
    roles = [r for r in ROLES if r in sets]
    head = ["model"] + [f"{sets[r]}" for r in roles]
    trained = [what for r, what in ROLES.items() if r in sets]
    lines = ["## Evaluation (aflite evaluate)", "",
             f"Models trained on {', on '.join(trained[:-1])} and on {trained[-1]}; "
             f"accuracy in % (± the standard deviation over seeds {ev.get('seeds')}). "
             + (ev.get("protocol") or "").rstrip(".") + ".",
             "", *([f"> {text(s)}" for s in ev["verdict"]] + [""] if ev.get("verdict") else [])]
    models = [k for k in ev.get("models") or [] if k in ev["scores"]] + sorted(set(ev["scores"]) - set(
        ev.get("models") or []))
    first = ev["scores"][models[0]] if models else {}
    for title, kind, name in _evaluations(ev):
        rows = [["chance (majority class of the same rows)"] + [_chance(first.get(r), kind, name) for r in roles]]
        rows += [[code(model)] + [_cell(ev["scores"][model].get(r), kind, name) for r in roles] for model in models]
        lines += [f"### On {title}", "", *_table(head, rows), ""]
    ts = ev.get("training_sets") or []
    lines += ["Training sets:", "", *_table(["set", "seed", "rows", "train part", "held-out part"],
                                            [[text(s["name"]), num(s.get("seed")), num(s.get("size")),
                                              num(s.get("train")), num(s.get("heldout"))] for s in ts]), ""]
    noted = list(dict.fromkeys(f"- {text(s['name'])}: {text(s['note'])}." for s in ts if s.get("note")))
    return lines + (["Notes on the training sets:", "", *noted, ""] if noted else [])


def _explain(ex: cs.ExplainFacts) -> list[str]:
    sig, test = cs.significant_counts(ex), ex["token_test"]
    lines = ["## Explanation (aflite explain)", ""]
    if sig:
        lines += [f"Significant (token, label) pairs on the {ex.get('token_view')} (Gardner et al. 2021's test, "
                  f"Bonferroni α = {test.get('alpha')}, tokens in at least {test.get('min_count')} texts):", "",
                  *_table(["set", "significant pairs"], [["D", num(sig.full)], ["D(Φ)", num(sig.kept)],
                                                         [f"same-size random subsets (mean of "
                                                          f"{test.get('random_subsets')})", num(sig.random)]]),
                  ""]
    top = ex.get("top_artifacts_kept") or []
    if top:
        lines += ["The strongest artifacts left in D(Φ):", "",
                  *_table(["token", "label", "texts", "p̂(label given token)", "z", "significant"],
                          [[f"{code(t['token'])}", f"{code(t['label'])}", num(t.get("count")), f"{t['p_label']:.3f}",
                            f"{t['z']:.2f}", "yes" if t.get("significant") else "no"] for t in top]), ""]
    dm = ex.get("datamap") or {}
    regions = dm.get("regions") or {}
    if regions:
        lines += ["Data map of the first phase (recomputed; agreement with the run "
                  f"{pct(ex.get('first_phase_agreement'))} %): rows per region and how many the filter removed:", "",
                  *_table(["region", "rows", "removed"], [[r, num(n), num((dm.get("removed_by_region") or {}).get(r))]
                                                         for r, n in _regions(regions)]), ""]
    if ex.get("label_issues") is not None:
        lines += [f"- Label-issue candidates (cleanlab): {num(ex['label_issues'])} rows."]
    sur = ex.get("surrogate") or {}
    if sur.get("r2") is not None:
        lines += [f"- A sparse surrogate ({sur.get('model')}) of p̃ from tokens × label: R² {sur['r2']:.3f}, "
                  f"{num(sur.get('n_terms'))} terms."]
    return lines + [""]


def _regions(regions: dict[str, int]) -> list[tuple[str, int]]:
    order = ["easy", "ambiguous", "hard", "unscored"]
    return [(r, regions[r]) for r in order if r in regions] + sorted((r, n) for r, n in regions.items()
                                                                      if r not in order)


def render_card(m: cs.CardManifest) -> str:
    """The whole README.md: ``---`` front matter ``---`` and the body. It depends on the manifest's content, not
    on its keys' order, so that ``manifest.json`` read back renders the same card."""
    body = [f"# {text(m['name'])}", "",
            f"D(Φ): the rows of {source_text(m['input'])} that AFLite kept — {num(m['filter']['size_before'])} → "
            f"{num(m['filter']['size_after'])} rows. Every figure on this card is copied from the run's results.json "
            f"(and, where shown, from `aflite evaluate` and `aflite explain` on this run); `manifest.json` beside it "
            f"holds the same facts.", "",
            *_data(m), *_how(m), *_changed(m)]
    ev, ex = m.get("evaluate"), m.get("explain")
    if ev:
        body += _evaluate(ev)
    if ex:
        body += _explain(ex)
    body += ["## Known limits", "", *[f"- {text(s)}" for s in m["limits"]], ""]
    return "---\n" + dump(dict(front_matter(m))) + "---\n\n" + "\n".join(body).rstrip("\n") + "\n"
