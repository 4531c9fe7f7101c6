"""aflite.features.cache (and the chunk records of aflite.features.npy), issue #55 item 5: a cache record holds the
whole key of its input (the inputs' fingerprint, featurizer, view, every option, the format) and one copied from
another dataset's run or made with other options is never used (a warning line says "foreign", and why), nor one
whose bytes changed ("damaged"); the same for the warm-up's cached model; `aflite embed`'s chunks carry the sha256
of their values, so a chunk changed after a real kill is embedded again by --resume, never sealed into
features.npy."""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import aflite.features as F

PREMISES = ["A man plays a guitar on stage.", "Two dogs run in a field.", "A woman reads a book.",
            "Children are swimming in a pool.", "A chef cooks pasta.", "An old man sits on a bench.",
            "A girl rides a red bike.", "People wait for a bus."] * 3
HYPS = ["A man is performing music.", "The cats are sleeping.", "A person is outdoors.",
        "Nobody is in the water.", "Someone is cooking.", "The man is running.", "A child is on a bike.",
        "The street is empty."] * 3
LABELS = ["entailment", "contradiction", "neutral", "contradiction", "entailment", "contradiction", "entailment",
          "contradiction"] * 3
OTHER_HYPS = [h.replace(".", " today.") for h in HYPS]  # another dataset of as many rows: same shape of Φ
NGRAM = {"n_components": 8, "min_df": 1}
ROOT = Path(__file__).resolve().parents[1]


def _entry(cache: Path) -> tuple[Path, Path]:
    """The one cached matrix in ``cache`` and its record."""
    (matrix,) = [p for p in cache.iterdir() if p.suffix in (".npy", ".npz")]
    return matrix, matrix.with_suffix(".json")


def _plant(src: Path, dest: Path) -> None:
    """Copy the entry cached in ``src`` into ``dest`` under the names of the entry cached in ``dest``: a record
    copied from another run, found where this call looks."""
    s_matrix, s_record = _entry(src)
    d_matrix, d_record = _entry(dest)
    shutil.copyfile(s_matrix, d_matrix)
    shutil.copyfile(s_record, d_record)


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


# ------------------------------------------------------------------------------------- (a) records tied to input


def test_the_record_holds_the_whole_key(tmp_path: Path) -> None:
    res = F.featurize(PREMISES, HYPS, "ngram", "pair", cache_dir=tmp_path, **NGRAM)
    assert res.cache_path is not None
    record = json.loads(res.cache_path.with_suffix(".json").read_text())
    for part in ("key", "inputs", "format", "featurizer", "view", "options", "extra", "aflite", "sha256"):
        assert part in record, part
    assert record["key"].startswith(res.cache_path.stem.rsplit("-", 1)[1])  # the name is cut from the key
    other = F.featurize(PREMISES, OTHER_HYPS, "ngram", "pair", cache_dir=tmp_path / "o", **NGRAM).cache_path
    assert other is not None
    theirs = json.loads(other.with_suffix(".json").read_text())
    assert theirs["inputs"] != record["inputs"] and theirs["options"] == record["options"]
    assert record["options"] == res.options and record["featurizer"] == "ngram" and record["view"] == "pair"


def test_a_record_copied_from_another_datasets_run_is_foreign_and_recomputed(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """On main the copied matrix (same shape, sha256 of its own bytes) was used as the other dataset's Φ."""
    F.featurize(PREMISES, HYPS, "ngram", "pair", cache_dir=tmp_path / "a", **NGRAM)
    truth = F.featurize(PREMISES, OTHER_HYPS, "ngram", "pair", cache_dir=tmp_path / "b", **NGRAM)
    _plant(tmp_path / "a", tmp_path / "b")
    with caplog.at_level(logging.WARNING, "aflite"):
        res = F.featurize(PREMISES, OTHER_HYPS, "ngram", "pair", cache_dir=tmp_path / "b", **NGRAM)
    assert not res.from_cache and np.array_equal(res.X, truth.X)
    (line,) = _warnings(caplog)
    assert line.startswith("foreign feature cache entry ") and "computed from other inputs" in line
    assert str(_entry(tmp_path / "b")[1]) in line and "\n" not in line
    again = F.featurize(PREMISES, OTHER_HYPS, "ngram", "pair", cache_dir=tmp_path / "b", **NGRAM)
    assert again.from_cache and np.array_equal(again.X, truth.X)  # the recomputed entry replaced the foreign one


def test_a_record_made_with_other_options_is_foreign_and_names_the_option(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    F.featurize(PREMISES, HYPS, "ngram", "pair", cache_dir=tmp_path / "a", word_ngrams=(1, 2), **NGRAM)
    truth = F.featurize(PREMISES, HYPS, "ngram", "pair", cache_dir=tmp_path / "b", word_ngrams=(1, 1), **NGRAM)
    _plant(tmp_path / "a", tmp_path / "b")
    with caplog.at_level(logging.WARNING, "aflite"):
        res = F.featurize(PREMISES, HYPS, "ngram", "pair", cache_dir=tmp_path / "b", word_ngrams=(1, 1), **NGRAM)
    assert not res.from_cache and np.array_equal(res.X, truth.X)
    (line,) = _warnings(caplog)
    assert line.startswith("foreign ") and "other featurizer options: word_ngrams=[1, 2] there, [1, 1] here" in line


def test_a_record_without_its_key_is_not_used(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A record as main wrote it (sha256, no key): it cannot be tied to its input, so it is recomputed."""
    first = F.featurize(PREMISES, HYPS, "ngram", "pair", cache_dir=tmp_path, **NGRAM)
    _, record = _entry(tmp_path)
    old = {k: v for k, v in json.loads(record.read_text()).items() if k not in ("key", "inputs", "extra", "format")}
    record.write_text(json.dumps(old))
    with caplog.at_level(logging.WARNING, "aflite"):
        res = F.featurize(PREMISES, HYPS, "ngram", "pair", cache_dir=tmp_path, **NGRAM)
    assert not res.from_cache and np.array_equal(res.X, first.X)
    (line,) = _warnings(caplog)
    assert line.startswith("foreign ") and "an older aflite's cache" in line


def test_foreign_and_damaged_are_told_apart(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    truth = F.featurize(PREMISES, HYPS, "ngram", "pair", cache_dir=tmp_path, **NGRAM)
    matrix, _ = _entry(tmp_path)
    raw = bytearray(matrix.read_bytes())
    raw[-5] ^= 0xFF  # one value's bytes changed, the record left as it was
    matrix.write_bytes(bytes(raw))
    with caplog.at_level(logging.WARNING, "aflite"):
        res = F.featurize(PREMISES, HYPS, "ngram", "pair", cache_dir=tmp_path, **NGRAM)
    assert not res.from_cache and np.array_equal(res.X, truth.X)
    (line,) = _warnings(caplog)
    assert line.startswith("damaged feature cache entry ") and "sha256 differs" in line


def test_a_foreign_entry_in_a_read_only_folder_is_neither_used_nor_touched(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A run folder's cache read by explain/evaluate: another dataset's entry there is not this run's Φ."""
    F.featurize(PREMISES, HYPS, "ngram", "pair", cache_dir=tmp_path / "a", **NGRAM)
    truth = F.featurize(PREMISES, OTHER_HYPS, "ngram", "pair", cache_dir=tmp_path / "ro", **NGRAM)
    _plant(tmp_path / "a", tmp_path / "ro")
    before = {p.name: p.read_bytes() for p in (tmp_path / "ro").iterdir()}
    with caplog.at_level(logging.WARNING, "aflite"):
        res = F.featurize(PREMISES, OTHER_HYPS, "ngram", "pair", cache_dir=tmp_path / "own",
                          read_only=[tmp_path / "ro"], **NGRAM)
    assert not res.from_cache and np.array_equal(res.X, truth.X)
    assert res.cache_path is not None and res.cache_path.parent == tmp_path / "own"
    assert {p.name: p.read_bytes() for p in (tmp_path / "ro").iterdir()} == before
    assert any(w.startswith("foreign ") for w in _warnings(caplog))


# ------------------------------------------------------------------------------ (a) the warm-up's cached model


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("torch")
    from tiny_models import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("tiny") / "bert")


def _warmup(cache: Path, tiny: Path, hyps: list[str], monkeypatch: pytest.MonkeyPatch, *,
            stop: bool = False) -> Any:
    """The warm-up Φ of (PREMISES, hyps); ``stop``: interrupted right after fine-tuning (its model left cached,
    as a kill during the embedding leaves it). Returns the Features, or the number of fine-tunings run."""
    from aflite.features.warmup import WarmupFeaturizer

    fits = {"n": 0}
    real_fit = WarmupFeaturizer.fit

    def counting_fit(self: Any, *a: Any, **k: Any) -> Any:
        fits["n"] += 1
        return real_fit(self, *a, **k)

    monkeypatch.setattr(WarmupFeaturizer, "fit", counting_fit)
    if stop:
        monkeypatch.setattr(WarmupFeaturizer, "transform", lambda self, *a, **k: (_ for _ in ()).throw(
            KeyboardInterrupt("stopped after the fine-tuning")))
    try:
        res = F.featurize(PREMISES, hyps, "warmup", "pair", cache_dir=cache, y=LABELS, warmup_size=6,
                          show_progress=False, model_path=str(tiny), max_steps=2, batch_size=4,
                          train_max_length=32, backend="torch")
    except KeyboardInterrupt:
        res = None
    finally:
        monkeypatch.undo()
    return res if not stop else fits["n"]


def test_a_warmup_model_copied_from_another_run_or_changed_is_fine_tuned_again(
        tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """On main the .warmup.pt of another dataset's run, put under this run's name, was loaded without a check."""
    truth = _warmup(tmp_path / "truth", tiny_model, OTHER_HYPS, monkeypatch)
    assert _warmup(tmp_path / "a", tiny_model, HYPS, monkeypatch, stop=True) == 1
    assert _warmup(tmp_path / "b", tiny_model, OTHER_HYPS, monkeypatch, stop=True) == 1
    (theirs,) = (tmp_path / "a").glob("*.warmup.pt")
    (ours,) = (tmp_path / "b").glob("*.warmup.pt")
    assert _warmup(tmp_path / "b", tiny_model, OTHER_HYPS, monkeypatch, stop=True) == 0  # its own: loaded
    for suffix in ("", ".json"):  # the model and its record (none on main), as copied from another run
        if Path(str(theirs) + suffix).is_file():
            shutil.copyfile(str(theirs) + suffix, str(ours) + suffix)
    with caplog.at_level(logging.WARNING, "aflite"):
        res = _warmup(tmp_path / "b", tiny_model, OTHER_HYPS, monkeypatch)
    assert np.array_equal(res.X, truth.X)
    assert any(w.startswith("foreign cached warm-up model ") and "computed from other inputs" in w
               for w in _warnings(caplog))
    assert not ours.exists() and not Path(str(ours) + ".json").exists()  # both gone once the matrix is cached
    # a model whose bytes changed after its record was written
    assert _warmup(tmp_path / "c", tiny_model, OTHER_HYPS, monkeypatch, stop=True) == 1
    (model,) = (tmp_path / "c").glob("*.warmup.pt")
    raw = bytearray(model.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    model.write_bytes(bytes(raw))
    caplog.clear()
    with caplog.at_level(logging.WARNING, "aflite"):
        res = _warmup(tmp_path / "c", tiny_model, OTHER_HYPS, monkeypatch)
    assert np.array_equal(res.X, truth.X)
    assert any(w.startswith("damaged cached warm-up model ") and "sha256 differs" in w for w in _warnings(caplog))


# ------------------------------------------------------------------ (b) embed's chunks, after a real SIGKILL

KILLED_CHILD = """
import os, signal, sys
from {module} import {cls} as F
real, calls = F.transform, [0]
def dying(self, *a, **k):
    calls[0] += 1
    if calls[0] == {kill_at}:  # a real kill, mid-run: no cleanup, no finally
        os.kill(os.getpid(), signal.SIGKILL)
    return real(self, *a, **k)
F.transform = dying
from aflite.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _killed(argv: list[str], module: str, cls: str, kill_at: int) -> None:
    """Run ``aflite ARGV`` in a child process that SIGKILLs itself on its ``kill_at``-th chunk."""
    code = textwrap.dedent(KILLED_CHILD).format(module=module, cls=cls, kill_at=kill_at)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-c", code, *argv], env=env, capture_output=True, text=True,
                          timeout=600, check=False)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]


def _counting(monkeypatch: pytest.MonkeyPatch, cls: Any) -> list[int]:
    """The rows of each chunk ``cls`` embeds in this process from now on."""
    rows: list[int] = []
    real = cls.transform

    def counting(self: Any, a: Any, b: Any = None, *, progress: Any = None) -> Any:
        rows.append(len(a))
        return real(self, a, b, progress=progress)

    monkeypatch.setattr(cls, "transform", counting)
    return rows


def _flip(path: Path) -> None:
    """Change the last stored float's exponent byte (little-endian): the file still loads, with another value."""
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 0x40
    path.write_bytes(bytes(raw))


def test_embed_resume_after_a_kill_re_embeds_a_changed_or_foreign_chunk(
        tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """On main a chunk's file was reused on its shape alone: the changed value was sealed into features.npy."""
    from aflite.cli import main
    from aflite.features.minilm import MiniLMFeaturizer

    data = tmp_path / "data.tsv"
    data.write_text("id\tpremise\thypothesis\tlabel\n" + "".join(
        f"r{i}\t{p}\t{h}\t{lab}\n" for i, (p, h, lab) in enumerate(zip(PREMISES, HYPS, LABELS, strict=True))))
    base = ["embed", str(data), "--featurizer", "minilm", "--model-path", str(tiny_model), "--backend", "torch",
            "--chunk-size", "4", "--device", "cpu", "--quiet"]
    assert main([*base, "--out", str(tmp_path / "full")]) == 0
    full = np.load(tmp_path / "full" / "features.npy")
    assert full.shape[0] == 24

    out = tmp_path / "part"
    _killed([*base, "--out", str(out)], "aflite.features.minilm", "MiniLMFeaturizer", kill_at=4)
    assert not (out / "features.npy").exists()
    (parts,) = (out / "cache").glob("minilm-pair-*.parts/chunk4")
    assert sorted(p.name for p in parts.glob("*.npy")) == [f"part-{c:06d}.npy" for c in range(3)]
    _flip(parts / "part-000001.npy")  # chunk 1's bytes changed after the kill, its record left as it was
    for ext in ("npy", "json"):  # chunk 2 replaced by chunk 0's files (main wrote no record): other rows
        if (parts / f"part-000000.{ext}").is_file():
            shutil.copyfile(parts / f"part-000000.{ext}", parts / f"part-000002.{ext}")
    rows = _counting(monkeypatch, MiniLMFeaturizer)
    with caplog.at_level(logging.WARNING, "aflite"):
        assert main([*base, "--out", str(out), "--resume"]) == 0
    assert rows == [4] * 5  # chunk 0 reused; the changed chunk 1, the foreign chunk 2 and 3-5 embedded
    assert np.allclose(np.load(out / "features.npy"), full, atol=1e-6)
    said = _warnings(caplog)
    assert any(w.startswith("damaged cached chunk ") and "part-000001.npy" in w and "sha256 differs" in w
               for w in said), said
    assert any(w.startswith("foreign cached chunk ") and "part-000002.npy" in w for w in said), said


@pytest.mark.slow  # three runs of an image network, one in a child process: ~40 s on two busy cores
def test_embed_images_resume_after_a_kill_re_embeds_a_changed_chunk(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """The memory-mapped features.npy.partial of an image run: on main its recorded chunks were trusted as they
    were, and the row changed after the kill was renamed into features.npy."""
    pytest.importorskip("torch")
    pytest.importorskip("PIL")
    from test_encoders import square_images, tiny_vit

    from aflite.cli import main
    from aflite.features.images import ImageFeaturizer

    square_images(tmp_path / "d", n_per_class=8)
    base = ["embed", str(tmp_path / "d"), "--featurizer", "hf-image", "--model-path",
            str(tiny_vit(tmp_path / "vit")), "--chunk-size", "5", "--quiet", "--device", "cpu"]
    assert main([*base, "--out", str(tmp_path / "full")]) == 0
    full = np.load(tmp_path / "full" / "features.npy")
    out = tmp_path / "part"
    _killed([*base, "--out", str(out)], "aflite.features.images", "ImageFeaturizer", kill_at=3)
    partial = out / "features.npy.partial"
    assert not (out / "features.npy").exists() and partial.is_file()
    assert json.loads((out / "features.npy.progress.json").read_text())["done"] == [0, 1]
    mm = np.load(partial, mmap_mode="r+")
    mm[6, 2] += 1000.0  # a row of chunk 1 changed after the kill
    mm.flush()
    del mm
    rows = _counting(monkeypatch, ImageFeaturizer)
    with caplog.at_level(logging.WARNING, "aflite"):
        assert main([*base, "--out", str(out), "--resume"]) == 0
    assert rows == [5, 5, 1]  # chunk 0 kept; the changed chunk 1 and the missing 2, 3 embedded
    assert np.allclose(np.load(out / "features.npy"), full, atol=1e-6)
    assert any(w.startswith("damaged chunk 1 (rows 5-9) of ") and "sha256 differs" in w for w in _warnings(caplog))
