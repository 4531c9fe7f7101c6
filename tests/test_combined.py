"""aflite.features.combined and the registry's combinations (``--featurizer warmup+ngram``): the spec follows from
the parts, bad combinations are refused before any work, each part is computed and cached as it would be alone, the
warm-up slice is left out of every part, each block is scaled to unit RMS row norm, and a run with a combined Φ is
read back by evaluate, explain and card."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from tiny_models import make_tiny_model

import aflite.features as F
from aflite.cli import main
from aflite.errors import ParameterError
from aflite.features.combined import scale_to_unit_rms
from aflite.features.registry import find, spec

PREMISES = ["A man plays a guitar on stage.", "Two dogs run in a field.", "A woman reads a book.",
            "Children are swimming in a pool.", "A chef cooks pasta.", "An old man sits on a bench.",
            "A girl rides a red bike.", "People wait for a bus."] * 3
HYPS = ["A man is performing music.", "The cats are sleeping.", "A person is outdoors.",
        "Nobody is in the water.", "Someone is cooking.", "The man is running.", "A child is on a bike.",
        "The street is empty."] * 3
LABELS = ["entailment", "contradiction", "neutral", "contradiction", "entailment", "contradiction", "entailment",
          "contradiction"] * 3
NGRAM = {"n_components": 8, "min_df": 1}


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("torch")
    return make_tiny_model(tmp_path_factory.mktemp("tiny") / "bert")


def test_a_combination_has_the_parts_capabilities() -> None:
    s = spec("warmup+ngram")
    assert s.needs_labels and not s.frozen and not s.shards and s.modality == "text"
    assert s.commands == ("run", "embed")  # the commands both parts offer, among those that take a combination
    assert set(s.options) == set(spec("warmup").options) | set(spec("ngram").options)  # each part's flags
    assert s.parts == ("warmup", "ngram")
    both = spec("minilm+ngram")
    assert not both.needs_labels and not both.frozen  # the n-grams fit their IDF and SVD on the rows
    assert both.title == "MiniLM + n-gram TF-IDF"
    assert find("ngram") is spec("ngram") and find("nope") is None and find("ngram+nope") is None


@pytest.mark.parametrize(("name", "why"), [
    ("ngram+ngram", "twice"), ("ngram+precomputed", "cannot be combined"), ("ngram+efficientnet-lite0", "cannot be"),
    ("warmup+bogus", "unknown part 'bogus'"), ("ngram+", "two or more"),
])
def test_bad_combinations_are_refused_with_the_reason(name: str, why: str, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ParameterError, match=why):
        spec(name)
    assert main(["run", str(tmp_path / "absent.tsv"), "--out", str(tmp_path / "out"), "--featurizer", name]) == 2
    err = capsys.readouterr().err
    assert why in err and "joined by '+'" in err
    assert not (tmp_path / "out").exists()


def test_audit_offers_no_combination(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", str(tmp_path / "absent.tsv"), "--out", str(tmp_path / "out"), "--featurizer",
                 "ngram+minilm"]) == 2
    assert "invalid choice: 'ngram+minilm'" in capsys.readouterr().err


def test_scale_to_unit_rms() -> None:
    x = np.array([[3.0, 4.0], [0.0, 0.0], [6.0, 8.0]], dtype=np.float32)  # row norms 5, 0, 10
    scaled, rms = scale_to_unit_rms(x)
    assert rms == pytest.approx(np.sqrt((25 + 100) / 3))
    assert np.mean(np.sum(scaled.astype(np.float64) ** 2, axis=1)) == pytest.approx(1.0)
    assert scale_to_unit_rms(np.zeros((2, 3), np.float32))[1] == 1.0


def test_warmup_plus_ngram_leaves_the_slice_out_of_every_part(tiny_model: Path, tmp_path: Path) -> None:
    opts = {"part_options": {"warmup": {"model_path": str(tiny_model), "max_steps": 2, "batch_size": 4,
                                        "train_max_length": 32, "backend": "torch"}, "ngram": NGRAM}}
    res = F.featurize(PREMISES, HYPS, "warmup+ngram", "pair", cache_dir=tmp_path, y=LABELS, warmup_size=6,
                      show_progress=False, **opts)
    alone_w = F.featurize(PREMISES, HYPS, "warmup", "pair", cache_dir=tmp_path, y=LABELS, warmup_size=6,
                          show_progress=False, **opts["part_options"]["warmup"])
    alone_n = F.featurize(PREMISES, HYPS, "ngram", "pair", cache_dir=tmp_path, show_progress=False, **NGRAM)
    assert alone_w.from_cache and alone_n.from_cache  # each part was computed and cached as it is alone
    assert np.array_equal(res.warmup_rows, alone_w.warmup_rows) and len(res.warmup_rows) == 6
    assert np.array_equal(res.rows, alone_w.rows)
    dw = alone_w.X.shape[1]
    assert res.X.shape == (len(PREMISES) - 6, dw + alone_n.X.shape[1]) and res.X.dtype == np.float32
    for block, alone in ((res.X[:, :dw], alone_w.X), (res.X[:, dw:], alone_n.X[res.rows])):
        assert np.mean(np.sum(block.astype(np.float64) ** 2, axis=1)) == pytest.approx(1.0, rel=1e-4)
        assert np.allclose(block, scale_to_unit_rms(alone)[0], atol=1e-6)  # the part's own rows, scaled
    assert res.info.warmup_steps == 2 and [p.name for p in res.info.parts or []] == ["warmup", "ngram"]
    # rebuilt from what it records (explain, evaluate): the same key, read from the cache
    again = F.featurize(PREMISES, HYPS, "warmup+ngram", "pair", cache_dir=tmp_path, y=LABELS, warmup_size=6,
                        show_progress=False, **res.options)
    assert again.from_cache and np.array_equal(again.X, res.X)
    assert res.options["part_options"]["warmup"]["backend"] == "torch"  # explicit: the CPU default may differ
    # parts another command cached, found in a read-only folder (evaluate reads the top level of its cache so)
    parts_only = tmp_path / "parts"
    parts_only.mkdir()
    for f in [*tmp_path.glob("warmup-pair-*"), *tmp_path.glob("ngram-pair-*")]:
        shutil.copy(f, parts_only / f.name)
    elsewhere = tmp_path / "elsewhere"
    other = F.featurize(PREMISES, HYPS, "warmup+ngram", "pair", cache_dir=elsewhere, y=LABELS, warmup_size=6,
                        show_progress=False, read_only=[parts_only], **opts)
    assert not other.from_cache and [p.from_cache for p in other.info.parts or []] == [True, True]
    assert np.array_equal(other.X, res.X) and not list(elsewhere.glob("warmup-*"))  # nothing trained again
    with pytest.raises(ParameterError, match="labels"):
        F.featurize(PREMISES, HYPS, "warmup+ngram", "pair", warmup_size=6, show_progress=False, **opts)
    with pytest.raises(ParameterError, match="no option batch_size"):
        F.make_featurizer("warmup+ngram", batch_size=4)


def test_a_run_with_a_combined_phi_is_read_by_evaluate_explain_and_card(tiny_model: Path, tmp_path: Path,
                                                                       small_snli: Path) -> None:
    run = tmp_path / "run"
    assert main(["run", str(small_snli), "--out", str(run), "--featurizer", "warmup+ngram", "--model-path",
                 str(tiny_model), "--max-steps", "2", "--backend", "torch", "--no-probe", "--quiet"]) == 0
    res = json.loads((run / "results.json").read_text())
    assert res["featurizer"]["name"] == "warmup+ngram" and res["featurizer"]["dim"] == 32 + 512
    warm = res["warmup_rows"]
    info = res["featurizer"]["info"]
    assert warm > 0 and info["warmup_rows"] == warm and info["warmup_steps"] == 2
    assert res["size_before"] == 300 - warm and res["dataset_size"] == 300
    assert main(["evaluate", str(small_snli), str(run), "--out", str(tmp_path / "ev"), "--models", "probe:ngram",
                 "--seeds", "1", "--quiet"]) == 0
    ev = json.loads((tmp_path / "ev" / "results.json").read_text())
    assert ev["config"]["excluded_warmup_rows"] == warm
    names = {s["name"] for s in ev["training_sets"]}
    assert "single-iteration(Φ warmup+ngram)" in names and "D(Φ warmup+ngram)" in names
    assert main(["explain", str(small_snli), str(run), "--out", str(tmp_path / "ex"), "--quiet"]) == 0
    assert main(["card", str(run), "--out", str(tmp_path / "card")]) == 0
    card = (tmp_path / "card" / "README.md").read_text()
    assert "warmup+ngram" in card and str(tmp_path) not in card  # the part's model folder is made portable
