"""``croissant.json``: the card in Croissant 1.1 (MLCommons' JSON-LD metadata for ML datasets), with its
Responsible-AI fields written from what aflite measured rather than from prose.

The dataset's name, description, license and citations; one FileObject (with its sha256) for the Parquet data file;
one RecordSet with a Field per column; and ``rai:dataBiases`` (the artifacts the run's probe and the explanation
measured), ``rai:dataLimitations`` (what AFLite removed, from which classes, and the card's known limits),
``rai:dataCollection`` and ``rai:dataPreprocessingProtocol`` (the input, Φ, the parameters, the seed, the
versions). Every figure is read from the card's manifest (the run's, evaluate's and explain's results.json);
shares are computed from its counts. Written only for a card whose data is Parquet (a saved dataset folder's Arrow
files have no Croissant reader). The same manifest gives the same bytes.
"""

from __future__ import annotations

import hashlib
import io
import json
from typing import Any

from aflite.card.schema import CardManifest, label_shift, probe_record, significant_counts

__all__ = ["CONFORMS_TO", "CROISSANT", "croissant", "croissant_text"]

CROISSANT = "croissant.json"
CONFORMS_TO = "http://mlcommons.org/croissant/1.1"
PAPER = ("Ronan Le Bras, Swabha Swayamdipta, Chandra Bhagavatula, Rowan Zellers, Matthew E. Peters, Ashish "
         "Sabharwal, Yejin Choi. Adversarial Filters of Dataset Biases. ICML 2020 (AFLite, Algorithm 1).")
RECORDS = "train"  # the RecordSet: the card's one split
FILE_ID = "data-file"
# the JSON-LD terms this file uses, as Croissant 1.1 defines them (a reader needs no network to expand them)
CONTEXT: dict[str, str | dict[str, str]] = {
    "@language": "en", "@vocab": "https://schema.org/", "sc": "https://schema.org/",
    "cr": "http://mlcommons.org/croissant/", "rai": "http://mlcommons.org/croissant/RAI/",
    "dct": "http://purl.org/dc/terms/", "citeAs": "cr:citeAs", "column": "cr:column", "conformsTo": "dct:conformsTo",
    "data": {"@id": "cr:data", "@type": "@json"}, "dataType": {"@id": "cr:dataType", "@type": "@vocab"},
    "examples": {"@id": "cr:examples", "@type": "@json"}, "extract": "cr:extract", "field": "cr:field",
    "fileObject": "cr:fileObject", "fileSet": "cr:fileSet", "format": "cr:format", "includes": "cr:includes",
    "key": "cr:key", "md5": "cr:md5", "recordSet": "cr:recordSet", "references": "cr:references",
    "source": "cr:source", "subField": "cr:subField", "transform": "cr:transform", "isLiveDataset": "cr:isLiveDataset",
    "arrayShape": "cr:arrayShape", "containedIn": "cr:containedIn", "isArray": "cr:isArray",
    "description": {"@container": "@language"}, "name": {"@container": "@language"},
    "equivalentProperty": "cr:equivalentProperty", "fileProperty": "cr:fileProperty", "jsonPath": "cr:jsonPath",
    "parentField": "cr:parentField", "path": "cr:path", "regex": "cr:regex", "repeated": "cr:repeated",
    "replace": "cr:replace", "samplingRate": "cr:samplingRate", "separator": "cr:separator",
}
DATA_TYPES = {"string": "sc:Text", "large_string": "sc:Text", "bool": "sc:Boolean", "double": "sc:Float",
              "float": "sc:Float", "halffloat": "sc:Float"}


def _data_type(arrow_type: str) -> str:
    if arrow_type.startswith(("int", "uint")):
        return "sc:Integer"
    return DATA_TYPES.get(arrow_type, "sc:Text")


def _pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f} %" if whole else "–"


def _biases(m: CardManifest) -> list[str]:
    """rai:dataBiases: the artifacts measured — the run's probe on D, D(Φ) and random subsets, the explanation's
    significant tokens and the strongest left, the evaluation's verdict, the label shift."""
    out = []
    probe = probe_record(m)
    if probe and probe.results:
        sets = "; ".join(f"{r.name}: {100 * r.accuracy:.1f} % (majority {100 * r.majority:.1f} %, lead "
                         f"{100 * r.delta_majority:+.1f} points)" for r in probe.results
                         if r.accuracy is not None and r.majority is not None and r.delta_majority is not None)
        out.append(f"Partial-input probe ({probe.model}, 5-fold cross-validation accuracy): {sets}.")
    ex = m.get("explain")
    sig = significant_counts(ex) if ex else None
    if ex and sig:
        test = ex["token_test"]
        out.append(f"Significant (token, label) pairs on the {ex.get('token_view')} (Gardner et al. 2021's test, "
                   f"Bonferroni alpha {test.get('alpha')}, tokens in at least {test.get('min_count')} texts): D "
                   f"{sig.full}, D(Φ) {sig.kept}, same-size random subsets {sig.random} (mean of "
                   f"{test.get('random_subsets')}).")
    for t in ex.get("top_artifacts_kept") or [] if ex else []:
        out.append(f"Left in D(Φ): token {t['token']!r} with label {t['label']!r} in {t.get('count')} texts, "
                   f"p(label | token) {t['p_label']:.3f}, z {t['z']:.2f}"
                   + (" (significant)." if t.get("significant") else "."))
    ev = m.get("evaluate")
    out += [f"Evaluation: {s}" for s in (ev.get("verdict") or [] if ev else [])]
    shift = label_shift(m)
    if shift and shift.warning:
        out.append(f"Label shift: {shift.warning}.")
    if not (probe and probe.results) and not sig and not ev:
        out.append("No artifact was measured for this card (the run's probe was skipped; no aflite explain or "
                   "evaluate folder was given).")
    return out


def _limitations(m: CardManifest) -> list[str]:
    """rai:dataLimitations: what AFLite removed and why, the share of each class removed, and the known limits."""
    flt, lab, phi = m["filter"], m["labels"], m["phi"]
    before, after = lab.get("before") or {}, lab.get("after") or {}
    removed = flt["size_before"] - flt["size_after"]
    gone = {k: before[k] - after.get(k, 0) for k in sorted(before)}
    per_class = "; ".join(f"{k!r}: {n} of {before[k]} ({_pct(n, before[k])})" for k, n in gone.items())
    return [f"AFLite removed {removed} of {flt['size_before']} rows ({_pct(removed, flt['size_before'])}) in "
            f"{flt.get('n_iterations')} phase(s): the rows an ensemble of linear models over the features Φ "
            f"({phi['featurizer']}, view {phi['view']}) predicted right most often (predictability >= tau "
            f"{(flt.get('parameters') or {}).get('threshold')}); it stopped because {flt.get('stop_reason')}.",
            f"Removed from each class: {per_class}.",
            "D(Φ) is adversarially filtered for linear models over this Φ only: cues that Φ does not represent, or "
            "that other models exploit, may remain.", *(m.get("limits") or [])]


def _collection(m: CardManifest) -> str:
    src = m["input"]
    return (f"D(Φ) is the subset that AFLite kept of {src.get('file')} ({src.get('rows')} rows, sha256 "
            f"{src.get('sha256')}, {src.get('sha256_source')}); its rows are the input's, unchanged. Kept ids: "
            f"{m['output']['kept_ids']['file']} (sha256 {m['output']['kept_ids']['sha256']}).")


def _protocol(m: CardManifest) -> list[str]:
    flt, phi = m["filter"], m["phi"]
    p = flt.get("parameters") or {}
    versions = m.get("versions") or {}
    return [f"Φ: featurizer {phi['featurizer']}, view {phi['view']}, {phi['dim']} dimensions, options "
            f"{json.dumps(phi['options'], sort_keys=True, ensure_ascii=False)}"
            + (f"; fine-tuned first on {phi['warmup_rows']} warm-up rows, which were then discarded"
               if phi.get("warmup_rows") else "") + ".",
            "AFLite parameters: " + ", ".join(f"{k} {json.dumps(p[k])}" for k in sorted(p)) + f"; groups "
            f"{json.dumps(flt.get('groups'))}; seed {flt.get('seed')}.",
            "Phase sizes: " + " -> ".join(str(s) for s in flt.get("sizes") or []) + ".",
            "Versions: " + ", ".join(f"{k} {versions[k]}" for k in sorted(versions)) + "."]


def croissant(m: CardManifest, data_name: str, data: bytes) -> dict[str, Any]:
    """The Croissant document of the card whose manifest facts are ``m`` and whose Parquet data file (``data_name``
    below the card's folder) holds ``data``."""
    import pyarrow.parquet as pq

    schema = pq.read_schema(io.BytesIO(data))
    lic = m["license"]
    cite = [c for c in (lic.get("attribution"), PAPER) if c]
    fields = [{"@type": "cr:Field", "@id": f"{RECORDS}/{f.name}", "name": f.name, "dataType": _data_type(str(f.type)),
               "source": {"fileObject": {"@id": FILE_ID}, "extract": {"column": f.name}}} for f in schema]
    return {
        "@context": CONTEXT, "@type": "sc:Dataset", "conformsTo": CONFORMS_TO,
        "name": m["name"],
        "description": f"D(Φ): the rows of {m['input']['file']} that AFLite kept ({m['filter']['size_before']} -> "
                       f"{m['filter']['size_after']} rows), written by aflite card.",
        "license": lic.get("url") or lic["id"],
        "citeAs": " ".join(cite),
        "citation": cite,
        "keywords": ["aflite", "adversarial-filtering", "dataset-artifacts"],
        "version": "1.0.0",
        "distribution": [{"@type": "cr:FileObject", "@id": FILE_ID, "name": data_name.rsplit("/", 1)[-1],
                          "contentUrl": data_name, "encodingFormat": "application/x-parquet",
                          "sha256": hashlib.sha256(data).hexdigest()}],
        "recordSet": [{"@type": "cr:RecordSet", "@id": RECORDS, "name": RECORDS, "field": fields}],
        "rai:dataCollection": _collection(m),
        "rai:dataPreprocessingProtocol": _protocol(m),
        "rai:dataBiases": _biases(m),
        "rai:dataLimitations": _limitations(m),
    }


def croissant_text(m: CardManifest, data_name: str, data: bytes) -> str:
    """croissant.json's bytes: indented, UTF-8 as itself, keys in the order above."""
    return json.dumps(croissant(m, data_name, data), indent=2, ensure_ascii=False) + "\n"
