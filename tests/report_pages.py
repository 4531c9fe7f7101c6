"""Output folders for the report tests, built for real: a small text dataset (with rows whose text is markup)
filtered by AFLite, and an explain folder beside it in the shape of ``aflite explain``'s files (tokens.csv,
instances.csv with the data-map columns, weights.csv, results.json with a verdict)."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

IMG = "<img src=x onerror=alert(1)>"
SCRIPT = "</script><script>document.title='pwned'</script>"
TITLE_SCRIPT = "<script>document.title='pwned'</script>"
WORDS = {"entailment": "outdoors", "neutral": "tall friend", "contradiction": "nobody sleeping"}


def write_dataset(path: Path, n: int = 300) -> Path:
    """A TSV of n pairs (sentence1, sentence2, gold_label, pairID): a third carry their label's give-away words;
    row 7 holds an image tag with an onerror handler, row 8 a script that would retitle the page."""
    rng = np.random.default_rng(0)
    labels = np.array(list(WORDS))[rng.integers(0, 3, n)]
    lines = ["sentence1\tsentence2\tgold_label\tpairID"]
    for i, lab in enumerate(labels):
        prem = f"A person number {i} walks in the park {rng.integers(0, 50)} times."
        hyp = f"Someone {WORDS[lab] if i % 3 == 0 else 'is'} here {rng.integers(0, 20)} gravel{i % 11}"
        if i == 7:
            hyp = f"{IMG} markup row"
        if i == 8:
            prem = f"{SCRIPT} second markup row"
        lines.append(f"{prem}\t{hyp}\t{lab}\tp{i}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def make_run(tmp: Path) -> Path:
    """A real AFLite run (n-gram Φ, m=8) on :func:`write_dataset`'s file, with its report.html."""
    from committed import commit

    from aflite.commands.report import write_page
    from aflite.commands.run import run

    data = write_dataset(tmp / "pairs.tsv")
    out = tmp / "run"
    res = run(data, out, featurizer="ngram", probe=False, show_progress=False,
              params={"n_partitions": 8, "train_size": 120, "slice_size": 20, "target_size": 150,
                      "threshold": 0.6})
    commit(out, {**res.summary, "verdict": ["A test verdict <b>not bold</b>."]}, command="run",
           argv=["run", str(data), "--out", str(out)])
    write_page(out)
    return out


def make_explain(tmp: Path, run_dir: Path) -> Path:
    """An explain folder for ``run_dir`` in the shape issue #22 specifies (values drawn from a seeded RNG, not
    computed: the page only reads them)."""
    rng = np.random.default_rng(1)
    out = tmp / "explain"
    out.mkdir()
    with (run_dir / "instances.csv").open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    regions = ["easy", "ambiguous", "hard"]
    with (out / "instances.csv").open("w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "label", "predictability", "removed_at", "confidence", "variability", "correctness",
                    "region", "label_issue", "top_features"])
        for r in rows:
            conf, var = rng.random(), 0.5 * rng.random()
            w.writerow([r["id"], r["label"], r["predictability"], r["removed_at"], f"{conf:.4f}", f"{var:.4f}",
                        f"{rng.random():.2f}", regions[int(conf * 3) % 3], int(rng.random() < 0.05),
                        "nobody:+1.2 sleeping:+0.8" if r["label"] == "contradiction" else "outdoors:+0.9"])
    with (out / "tokens.csv").open("w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["set", "token", "label", "count", "label_count", "p_label", "z", "p_value", "significant"])
        for s in ("full", "kept", "random"):
            for k, tok in enumerate(["nobody", "sleeping", "outdoors", "tall", "<b>tag</b>", "is", "here"]):
                for lab in WORDS:
                    count = 20 + 7 * k
                    p_lab = 0.9 if tok in WORDS[lab] else 0.05
                    p0 = 1 / 3
                    z = (p_lab - p0) / np.sqrt(p0 * (1 - p0) / count)
                    w.writerow([s, tok, lab, count, int(round(p_lab * count)), f"{p_lab:.4f}", f"{z:.4f}",
                                "0.001", int(z > 4 and s != "kept")])
    # in reverse row order: the page must match them by id
    lines = [f"{r['id']},{r['label']},{k % 7 / 7:.4f}\n" for k, r in reversed(list(enumerate(rows)))]
    (out / "weights.csv").write_text("id,label,weight\n" + "".join(lines), encoding="utf-8")  # explain's shape
    from committed import commit

    from aflite.commands.report import write_page

    commit(out, {"run": {"folder": str(run_dir)}, "first_phase": {}, "dataset": str(tmp / "pairs.tsv"),
                 "checks": {"tokens": {"summary": {"significant_tokens": {"full": 9, "kept": 0, "random": 9}},
                                       "options": {}, "columns": [], "files": []}},
                 "verdict": ["Planted artifacts were found on D and none remain on D(Φ)."]},
           command="explain", argv=["explain", str(tmp / "pairs.tsv"), str(run_dir), "--out", str(out)])

    write_page(out)
    return out


def make_evaluate_finetuned(tmp: Path, run_dir: Path) -> Path:
    """A real ``aflite evaluate`` folder with a fine-tuned model (a tiny random BERT, seeded) on the run's dataset:
    a learning-rate check of two candidates, then D, one random subset and D(Φ) trained for a few steps each."""
    import torch
    from tiny_models import make_tiny_model

    from aflite.commands.evaluate import evaluate
    from aflite.evaluate import FinetuneOptions

    torch.manual_seed(0)
    model = make_tiny_model(tmp / "tiny_bert")
    out = tmp / "evaluate_ft"
    ft = FinetuneOptions(model_path=str(model), batch_size=16, max_length=32, max_train=48, max_steps=6,
                         lr_candidates=(1e-6, 3e-3), cpu_lr_check_rows=80)
    evaluate(tmp / "pairs.tsv", [run_dir], out, models=["finetune:pair"], seeds=1, single_iteration=False,
             finetune=ft, show_progress=False)
    return out
