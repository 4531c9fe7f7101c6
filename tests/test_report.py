"""The HTML report (self-contained, escaped) and the ``aflite audit`` command on the bundled SNLI sample."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from aflite import audit as A
from aflite.cli import main
from aflite.data import Dataset, SourceInfo, demo_dataset_path, load_dataset
from aflite.report import esc, render, write_report

SCRIPT = "<script>alert('x')</script>"


def _dataset(n: int = 240) -> Dataset:
    rng = np.random.default_rng(0)
    labels = np.array(["entailment", "neutral", "contradiction"])[np.arange(n) % 3]
    words = {"entailment": "outdoors", "neutral": "tall friend", "contradiction": "nobody sleeping"}
    texts_a = [f"A person number {i} walks & talks." for i in range(n)]
    texts_b = [f"{SCRIPT} {words[lab]} {rng.integers(0, 9)}" if i % 2 else f"Someone \"{words[lab]}\" {i % 7}"
               for i, lab in enumerate(labels)]
    src = SourceInfo(Path("mem.tsv"), "tsv", "generic", False, {}, np.arange(n))
    return Dataset(texts_a, texts_b, labels, np.array([str(i) for i in range(n)]), np.arange(n) // 3, src)


@pytest.fixture(scope="module")
def small_result(tmp_path_factory: pytest.TempPathFactory) -> A.DatasetAudit:
    cache = tmp_path_factory.mktemp("cache")
    return A.audit(_dataset(), featurizer="ngram", tra=False, n_clusters=6, n_components=5, tsne_sample=100,
                   cache_dir=str(cache), show_progress=False)


def test_report_escapes_dataset_text(small_result: A.DatasetAudit, tmp_path: Path) -> None:
    html = render([small_result], title="audit of <b>evil</b>")
    assert SCRIPT not in html
    # the only scripts are the page's own: the interactive maps' data (JSON), plotly.js and the drawing code
    opening = re.findall(r"<script[^>]*>", html, flags=re.I)
    maps = html.count('<script type="application/json" id="tsne-')
    assert len(opening) == maps + (2 if maps else 0)
    assert "alert('x')" not in html
    assert esc(SCRIPT) in html  # the hypothesis is shown, escaped
    assert "audit of &lt;b&gt;evil&lt;/b&gt;" in html
    path = write_report(tmp_path / "r.html", [small_result])
    assert path.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_report_is_self_contained(small_result: A.DatasetAudit) -> None:
    page = render([small_result, small_result])
    # the markup outside the inline scripts (plotly.js carries attribution links of its own, never loaded: the
    # page's CSP blocks every fetch, and tests/test_report_browser.py checks that no request is made)
    html = re.sub(r"<script>.*?</script>", "", page, flags=re.S)
    imgs = re.findall(r'<img [^>]*src="([^"]+)"', html)
    assert imgs and all(src.startswith("data:image/png;base64,") for src in imgs)
    assert not re.search(r'(src|href)="(https?:)?//', html)
    assert "<link" not in html
    assert "default-src 'none'" in html  # the Content-Security-Policy
    # both metric tables are rendered with numbers
    assert html.count("Biased-condition accuracy") == 2  # one table per view, two datasets side by side each


def test_result_to_dict_is_json(small_result: A.DatasetAudit) -> None:
    d = json.loads(json.dumps(small_result.to_dict()))
    hyp = d["views"]["hypothesis"]
    assert hyp["condition"] == "s2"
    assert hyp["biased_accuracy"] > 0.9  # the planted tokens give the label away
    assert hyp["delta_maj"] > 0.5
    assert d["views"]["premise"]["biased_accuracy"] < 0.6
    assert set(hyp["token_artifacts"]) == {"entailment", "neutral", "contradiction"}
    assert hyp["token_artifacts"]["contradiction"][0]["token"] in {"nobody", "sleeping"}


@pytest.mark.slow  # over 6 s on 2 cores (CI runs it with --run-slow)
def test_cli_audit_on_the_bundled_sample(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from committed import commit
    from tiny_models import make_tiny_model

    tiny = make_tiny_model(tmp_path / "tiny")
    ds = load_dataset(demo_dataset_path())
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    kept = [str(i) for i in ds.ids[::2]]
    (run_dir / "kept_ids.txt").write_text("\n".join(kept) + "\n", encoding="utf-8")
    # committed as a filter run would be (results.json with the manifest): --compare reads a verified run only
    parameters = {"dataset_size": len(ds), "target_size": len(kept), "n_partitions": 1, "train_size": 1,
                  "slice_size": 1, "threshold": 0.75, "strategy": "slicing", "model": "logistic", "C": 1.0}
    commit(run_dir, {"parameters": parameters, "size_before": len(ds), "size_after": len(kept), "n_iterations": 0,
                     "sizes": [len(ds), len(kept)], "iterations": []}, command="filter")
    out = tmp_path / "audit"
    code = main([
        "audit", str(demo_dataset_path()), "--out", str(out), "--featurizer", "ngram", "--model-path", str(tiny),
        "--tra", "--tra-steps", "2", "--tra-batch-size", "8", "--tra-sample", "3", "--tra-eval", "30",
        "--tsne-sample", "100", "--n-clusters", "10", "--n-components", "10", "--n-folds", "3", "--sample", "300",
        "--compare", str(run_dir),
        "--quiet", "--device", "cpu",
    ])
    assert code == 0
    html = (out / "report.html").read_text(encoding="utf-8")
    metrics = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert [r["name"] for r in metrics["results"]] == ["D", "D(Φ)"]
    assert metrics["results"][0]["n"] == 300 and metrics["results"][1]["n"] == 300
    for r in metrics["results"]:
        for view in ("hypothesis", "premise"):
            v = r["views"][view]
            assert 0 <= v["biased_accuracy"] <= 1 and 0 <= v["nba"] <= 1
            assert v["tra"] is not None and 0 <= v["tra"] <= 1
            assert v["peco"] >= 0
    assert "D(Φ)" in html and "data:image/png;base64," in html
    assert html.count("<!DOCTYPE html>") == 1 and html.count("<!--aflite:audit-body-->") == 1  # re-framed once
    # hypothesis-only leakage is real on SNLI, even with hashed n-grams on 2,949 pairs
    hyp = metrics["results"][0]["views"]["hypothesis"]
    assert hyp["delta_maj"] > 0.05


def test_cli_audit_rejects_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", str(tmp_path / "missing.tsv"), "--out", str(tmp_path / "o")]) == 2
    assert main(["audit", str(demo_dataset_path()), "--out", str(tmp_path / "o"), "--n-folds", "1"]) == 2
    run_dir = tmp_path / "notarun"
    run_dir.mkdir()
    shutil.rmtree(tmp_path / "o", ignore_errors=True)
    err = capsys.readouterr().err
    assert "error" in err


def test_report_shows_chance_and_the_peco_null(small_result: A.DatasetAudit) -> None:
    html = render([small_result])
    assert html.count("Chance: majority-class rate of these rows") == 2  # one row per view
    assert "Δmaj: biased − chance" in html and "normal − chance" in html
    assert "PECO with labels shuffled" in html and "PECO − null mean" in html
    hyp = small_result.views["hypothesis"]
    assert hyp.peco_null is not None
    assert f"<td>{hyp.peco_null.excess:.3f}</td>" in html
    # the dataset table's chance is the majority share of the audited rows (80 of 240 here)
    assert "<td>33.3</td>" in html


def test_report_shows_the_paper_only_for_a_named_dataset(small_result: A.DatasetAudit) -> None:
    from aflite.errors import ParameterError

    plain = render([small_result])
    assert "Paper:" not in plain and "71.6" not in plain and "--reference" in plain
    snli = render([small_result], reference="snli")
    assert snli.count("Paper: SNLI s2") == 1 and "<td>71.6</td>" in snli  # hypothesis view only
    fever = render([small_result], reference="FEVER")
    assert fever.count("Paper: FEVER s1") == 1 and "<td>63.5</td>" in fever and "Paper: FEVER s2" not in fever
    both = render([small_result], reference="caugnli")
    assert "Paper: CAugNLI s2" in both and "Paper: CAugNLI s1" in both
    with pytest.raises(ParameterError, match="snli"):
        render([small_result], reference="imagenet")


def test_cli_audit_defaults_names_and_times(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    import torch

    if torch.cuda.is_available():
        pytest.skip("checks the CPU defaults")
    real = A.compute_features

    def slow_features(*a: object, **kw: object) -> object:  # featurization that takes a measurable second
        time.sleep(1.0)
        return real(*a, **kw)  # type: ignore[arg-type]

    from aflite.audit import modalities

    monkeypatch.setattr(modalities, "compute_features", slow_features)  # where audit_file's flow looks it up
    out = tmp_path / "a"
    args = ["audit", str(demo_dataset_path()), "--out", str(out), "--featurizer", "ngram", "--sample", "240",
            "--n-clusters", "6", "--n-components", "5", "--tsne-sample", "0", "--n-folds", "3", "--peco-shuffles", "7",
            "--bias-threshold", "0.3"]
    assert main(args) == 0
    captured = capsys.readouterr()
    assert "TRA skipped: no GPU" in captured.err  # no fine-tuning by default on a CPU
    assert "chance = majority class" in captured.out and "vs shuffled labels" in captured.out
    metrics = json.loads((out / "results.json").read_text(encoding="utf-8"))
    res = metrics["results"][0]
    assert res["config"]["tra"] is False and res["config"]["bias_threshold"] == 0.3
    assert res["views"]["hypothesis"]["peco_null"]["shuffles"] == 7
    assert res["views"]["hypothesis"]["tra"] is None
    # the time shown includes the featurization done before the audit proper
    assert res["timings_s"]["features"] >= 1.0
    assert res["timings_s"]["total"] >= res["timings_s"]["features"] + res["timings_s"]["peco"]
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "Paper:" not in html
    # the old name of the PECO cut is gone (it meant τ elsewhere); an unknown reference fails before any output
    assert main(args[:2] + ["--out", str(tmp_path / "b")] + args[4:] + ["--threshold", "0.3"]) == 2
    assert "unrecognized arguments: --threshold" in capsys.readouterr().err
    assert main(args[:2] + ["--out", str(tmp_path / "c")] + args[4:] + ["--reference", "imagenet"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "choose from none, sick, snli" in err
    assert not (tmp_path / "c").exists()
