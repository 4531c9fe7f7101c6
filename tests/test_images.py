"""Image datasets (aflite.images): loaders for folders / tables / HF datasets, unreadable images, the image
featurizers behind `featurize` (cache, resume), and `aflite run` on images writing outputs in the input's form."""

from __future__ import annotations

import csv
import json
import os
import re
from pathlib import Path

import numpy as np
import pytest

from aflite.audit import images as audit_images_mod
from aflite.data import images
from aflite.errors import InputError, ParameterError

PIL = pytest.importorskip("PIL.Image")

from test_encoders import needs_effnet, square_images, tiny_vit  # noqa: E402


def _table(folder: Path, paths: list[str], labels: np.ndarray, name: str = "data.csv") -> Path:
    p = folder / name
    with open(p, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["image", "label", "note"])
        for q, lab in zip(paths, labels, strict=True):
            w.writerow([Path(q).relative_to(folder).as_posix(), f"c{lab}", "x"])
    return p


def test_folder_loader(tmp_path: Path) -> None:
    paths, y = square_images(tmp_path / "d", n_per_class=3)
    (tmp_path / "d" / "1" / "notes.txt").write_text("not an image")
    assert images.is_image_folder(tmp_path / "d")
    ds = images.load_image_dataset(tmp_path / "d")
    assert ds.texts_b is None and ds.groups is None and ds.source.format == "imagefolder"
    assert ds.ids.tolist() == [f"{c}/{i:03d}.png" for c in (0, 1) for i in range(3)]
    assert ds.labels.tolist() == ["0"] * 3 + ["1"] * 3
    assert ds.texts_a == [str(Path(p).resolve()) for p in paths]


def test_folder_loader_errors(tmp_path: Path) -> None:
    (tmp_path / "one" / "a").mkdir(parents=True)
    PIL.new("RGB", (4, 4)).save(tmp_path / "one" / "a" / "x.png")
    with pytest.raises(InputError, match="one class folder"):
        images.load_image_dataset(tmp_path / "one")
    with pytest.raises(InputError, match="no such file"):
        images.load_image_dataset(tmp_path / "missing")


def test_table_loader_relative_paths_and_errors(tmp_path: Path) -> None:
    paths, y = square_images(tmp_path / "img", n_per_class=2)
    table = _table(tmp_path, paths, y)
    ds = images.load_image_dataset(table)
    assert ds.source.format == "csv" and ds.labels.tolist() == ["c0", "c0", "c1", "c1"]
    assert ds.texts_a == [str(Path(p).resolve()) for p in paths]
    Path(paths[1]).unlink()
    with pytest.raises(InputError, match=r"data\.csv: row 2, column 'image': no image file"):
        images.load_image_dataset(table)
    other = tmp_path / "other.csv"
    other.write_text("file_name_x,label\nimg/0/000.png,a\n")
    with pytest.raises(InputError, match="no path column"):
        images.load_image_dataset(other)


def test_unreadable_image_one_line_error_or_skipped(tmp_path: Path) -> None:
    square_images(tmp_path / "d", n_per_class=3)
    bad = tmp_path / "d" / "1" / "broken.png"
    bad.write_bytes(b"\x89PNG\r\n\x1a\n this is not a png")
    ds = images.load_image_dataset(tmp_path / "d")
    assert len(ds) == 7
    with pytest.raises(InputError) as exc:
        images.open_image(ds.texts_a[-1])
    msg = str(exc.value)
    assert "broken.png" in msg and "not a readable image" in msg and "\n" not in msg
    ds = images.load_image_dataset(tmp_path / "d", skip_bad_images=True)
    assert len(ds) == 6 and ds.dropped == {"unreadable_image": 1} and ds.bad_images == [str(bad.resolve())]


def test_hf_dataset_with_image_column(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    paths, y = square_images(tmp_path / "img", n_per_class=2)
    hf = datasets.Dataset.from_dict({"img": paths, "label": y.tolist()}).cast_column("img", datasets.Image())
    hf = hf.cast_column("label", datasets.ClassLabel(names=["square", "disc"]))
    hf.save_to_disk(str(tmp_path / "hf"))
    ds = images.load_image_dataset(tmp_path / "hf")
    assert ds.source.format == "hf" and ds.labels.tolist() == ["square", "square", "disc", "disc"]
    a = np.asarray(images.open_image(ds.texts_a[2]))
    b = np.asarray(PIL.open(paths[2]).convert("RGB"))
    assert a.shape == b.shape and (a == b).all()
    assert images.files_fingerprint(ds.texts_a) == images.files_fingerprint(list(ds.texts_a))


def test_featurize_images_cache_and_file_change(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from aflite.features import featurize

    paths, _ = square_images(tmp_path / "d", n_per_class=3)
    model = tiny_vit(tmp_path / "vit")
    f1 = featurize(paths, None, "hf-image", cache_dir=tmp_path / "c", show_progress=False, model_path=model)
    f2 = featurize(paths, None, "hf-image", cache_dir=tmp_path / "c", show_progress=False, model_path=model)
    assert f1.X.shape == (6, 32) and f2.from_cache and np.array_equal(f1.X, f2.X)
    PIL.new("RGB", (24, 24), (0, 255, 0)).save(paths[0])  # a replaced image is re-embedded
    f3 = featurize(paths, None, "hf-image", cache_dir=tmp_path / "c", show_progress=False, model_path=model)
    assert not f3.from_cache and not np.allclose(f3.X[0], f1.X[0]) and np.allclose(f3.X[1:], f1.X[1:], atol=1e-6)


def test_featurizer_options_refuse_text_featurizers() -> None:
    from aflite.features.registry import image_featurizer_options

    with pytest.raises(ParameterError, match="reads text"):
        image_featurizer_options("ngram", {})
    assert image_featurizer_options("warmup", {})["image_model"] == "efficientnet-lite0"
    assert image_featurizer_options("warmup", {"model_path": "m"})["image_model"] == "hf-image"


# ------------------------------------------------------------------------------------------------ aflite run


def _run(argv: list[str]) -> int:
    from aflite.cli import main

    return main(argv)


FILTER = ["--train-size", "6", "--slice-size", "2", "--target-size", "10", "--n-partitions", "8", "--threshold", "0",
          "--quiet", "--device", "cpu"]


def test_run_folder_writes_kept_removed_and_links(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    square_images(tmp_path / "d", n_per_class=8)
    model = tiny_vit(tmp_path / "vit")
    out = tmp_path / "out"
    rc = _run(["run", str(tmp_path / "d"), "--out", str(out), "--featurizer", "hf-image", "--model-path", str(model),
               "--link-dir", str(tmp_path / "links"), *FILTER])
    assert rc == 0
    kept = list(csv.DictReader(open(out / "kept.csv")))
    removed = list(csv.DictReader(open(out / "removed.csv")))
    assert len(kept) == 10 and len(removed) == 6
    assert {r["path"] for r in kept} | {r["path"] for r in removed} == {f"{c}/{i:03d}.png" for c in (0, 1)
                                                                       for i in range(8)}
    assert set((out / "kept_ids.txt").read_text().split()) == {r["path"] for r in kept}
    links = sorted(p.relative_to(tmp_path / "links").as_posix() for p in (tmp_path / "links").rglob("*.png"))
    assert links == sorted(r["path"] for r in kept)
    first = tmp_path / "links" / kept[0]["path"]
    assert first.is_symlink() and first.resolve() == (tmp_path / "d" / kept[0]["path"]).resolve()


def test_run_table_writes_filtered_table(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    paths, y = square_images(tmp_path / "img", n_per_class=8)
    table = _table(tmp_path, paths, y)
    out = tmp_path / "out"
    rc = _run(["run", str(table), "--out", str(out), "--featurizer", "hf-image", "--model-path",
               str(tiny_vit(tmp_path / "vit")), *FILTER])
    assert rc == 0
    lines = (out / "filtered.csv").read_text().splitlines()
    assert lines[0] == "image,label,note" and len(lines) == 11
    kept = set((out / "kept_ids.txt").read_text().split())
    all_lines = table.read_text().splitlines()
    ids = images.load_image_dataset(table).ids.tolist()
    assert lines[1:] == [all_lines[j + 1] for j, i in enumerate(ids) if i in kept]


def test_run_bad_image_exit_2_one_line_or_skipped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")
    square_images(tmp_path / "d", n_per_class=8)
    (tmp_path / "d" / "0" / "zz.png").write_bytes(b"garbage")
    model = str(tiny_vit(tmp_path / "vit"))
    rc = _run(["run", str(tmp_path / "d"), "--out", str(tmp_path / "o1"), "--featurizer", "hf-image", "--model-path",
               model, *FILTER])
    err = [line for line in capsys.readouterr().err.splitlines() if "error" in line]  # (transformers' load bar)
    assert rc == 2 and len(err) == 1 and "zz.png" in err[0] and "not a readable image" in err[0]
    assert err[0].startswith("aflite run: error: ")
    assert not (tmp_path / "o1" / "kept.csv").exists()
    rc = _run(["run", str(tmp_path / "d"), "--out", str(tmp_path / "o2"), "--featurizer", "hf-image", "--model-path",
               model, "--skip-bad-images", *FILTER])
    assert rc == 0
    assert (tmp_path / "o2" / "bad_images.txt").read_text().strip().endswith("zz.png")
    assert "0/zz.png" not in (tmp_path / "o2" / "kept.csv").read_text()


def test_run_text_featurizer_on_images_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    square_images(tmp_path / "d", n_per_class=3)
    rc = _run(["run", str(tmp_path / "d"), "--out", str(tmp_path / "o"), "--featurizer", "ngram", "--quiet"])
    assert rc == 2 and "reads text" in capsys.readouterr().err


@needs_effnet
def test_run_folder_efficientnet_lite0(tmp_path: Path) -> None:
    """`aflite run FOLDER --featurizer efficientnet-lite0` end to end (small images to keep it quick)."""
    square_images(tmp_path / "d", n_per_class=8)
    out = tmp_path / "out"
    rc = _run(["run", str(tmp_path / "d"), "--out", str(out), "--featurizer", "efficientnet-lite0",
               "--image-size", "32", *FILTER])
    assert rc == 0
    import json

    s = json.loads((out / "results.json").read_text())
    assert s["featurizer"]["name"] == "efficientnet-lite0" and s["featurizer"]["dim"] == 1280
    assert s["size_after"] == 10 and len((out / "kept.csv").read_text().splitlines()) == 11


def test_run_folder_warmup_discards_the_warmup_slice(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    square_images(tmp_path / "d", n_per_class=10)
    out = tmp_path / "out"
    rc = _run(["run", str(tmp_path / "d"), "--out", str(out), "--featurizer", "warmup", "--model-path",
               str(tiny_vit(tmp_path / "vit")), "--max-steps", "3", "--train-size", "6", "--slice-size", "2",
               "--target-size", "8", "--n-partitions", "8", "--threshold", "0", "--quiet", "--device", "cpu"])
    assert rc == 0
    warm = set((out / "warmup_ids.txt").read_text().split())
    kept = {r["path"] for r in csv.DictReader(open(out / "kept.csv"))}
    removed = {r["path"] for r in csv.DictReader(open(out / "removed.csv"))}
    assert len(warm) == 6 and not warm & (kept | removed) and len(kept) + len(removed) == 14


# ------------------------------------------------------------------------------------------- aflite embed


def test_embed_images_memmap_resume_then_filter_mmap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`aflite embed IMAGE_DIR` writes OUT/features.npy chunk by chunk; an interrupted run resumes at the first missing
    chunk (earlier chunks are not recomputed) and the result equals an uninterrupted run; `aflite filter --mmap`
    reads it."""
    pytest.importorskip("torch")
    from aflite import features

    square_images(tmp_path / "d", n_per_class=8)
    model = str(tiny_vit(tmp_path / "vit"))
    base = ["embed", str(tmp_path / "d"), "--featurizer", "hf-image", "--model-path", model, "--chunk-size", "5",
            "--quiet", "--device", "cpu"]
    assert _run([*base, "--out", str(tmp_path / "full")]) == 0
    full = np.load(tmp_path / "full" / "features.npy")
    assert full.shape == (16, 32) and full.dtype == np.float32

    calls: list[int] = []
    real = features.ImageFeaturizer.transform

    def flaky(self, texts_a, texts_b=None, *, progress=None):  # type: ignore[no-untyped-def]
        calls.append(len(texts_a))
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(self, texts_a, texts_b, progress=progress)

    monkeypatch.setattr(features.ImageFeaturizer, "transform", flaky)
    assert _run([*base, "--out", str(tmp_path / "part")]) == 130
    part = tmp_path / "part"
    assert not (part / "features.npy").exists() and (part / "features.npy.partial").exists()
    calls.clear()
    monkeypatch.setattr(features.ImageFeaturizer, "transform", real)
    monkeypatch.setattr(features.ImageFeaturizer, "transform",
                        lambda self, a, b=None, *, progress=None: calls.append(len(a)) or real(self, a, b,
                                                                                             progress=progress))
    assert _run([*base, "--out", str(tmp_path / "part")]) == 0
    assert calls == [5, 1]  # chunks 0 and 1 were kept; chunks 2 (5 rows) and 3 (1 row) were embedded
    assert np.allclose(np.load(part / "features.npy"), full, atol=1e-6)
    assert not (part / "features.npy.partial").exists() and not (part / "features.npy.progress.json").exists()
    assert (part / "ids.txt").read_text().split()[0] == "0/000.png"
    assert json.loads((part / "results.json").read_text())["rows"] == 16 and (part / "summary.md").is_file()

    rc = _run(["filter", "--features", str(part / "features.npy"), "--labels", str(part / "labels.txt"),
               "--ids", str(part / "ids.txt"), "--mmap", "--out", str(tmp_path / "f"), "--train-size", "6",
               "--slice-size", "2", "--target-size", "10", "--n-partitions", "8", "--threshold", "0", "--quiet"])
    assert rc == 0
    assert len((tmp_path / "f" / "kept_ids.txt").read_text().split()) == 10


# --------------------------------------------------------------------------------------------- aflite evaluate


def test_evaluate_on_images_with_ood_folder(tmp_path: Path) -> None:
    """evaluate trains a linear probe and an MLP on frozen image features, and fine-tunes the image network, on D,
    D(Φ), random subsets and the single-iteration set, and scores them on the held-out split and an OOD folder."""
    pytest.importorskip("torch")
    from aflite.commands.evaluate import evaluate
    from aflite.evaluate import load_eval_set

    square_images(tmp_path / "d", n_per_class=30)
    square_images(tmp_path / "ood", n_per_class=4, seed=9)
    model = str(tiny_vit(tmp_path / "vit"))
    run = tmp_path / "run"
    assert _run(["run", str(tmp_path / "d"), "--out", str(run), "--featurizer", "hf-image", "--model-path", model,
                 "--cache-dir", str(tmp_path / "cache"), "--train-size", "12", "--slice-size", "4",
                 "--target-size", "44",
                 "--n-partitions", "8", "--threshold", "0", "--quiet", "--device", "cpu"]) == 0
    ood = load_eval_set(tmp_path / "ood", "squares-ood")
    assert len(ood) == 8 and ood.texts_b is None
    from aflite.evaluate import FinetuneOptions

    ft = FinetuneOptions(model_path=model, max_steps=2, batch_size=8, device="cpu")
    rep = evaluate(tmp_path / "d", [run], tmp_path / "eval", models=["probe:hf-image", "mlp:hf-image", "finetune"],
                   seeds=2, heldout=0.25, eval_sets=[ood], cache_dir=tmp_path / "cache", show_progress=False,
                   finetune=ft)
    assert rep.config["finetune"]["image_model"] == "hf-image"
    assert rep.config["finetune"]["lr"] == 1e-3  # the image default (training.WARMUP_IMAGE), not text's 1e-5
    assert {r["model"] for r in rep.results} == {"probe:hf-image:pair", "mlp:hf-image:pair", "finetune:pair"}
    kinds = {ts["kind"] for ts in rep.training_sets}
    assert kinds == {"D", "filtered", "random", "single"}
    assert (tmp_path / "eval" / "results.json").is_file()
    text = (tmp_path / "eval" / "results.json").read_text()
    assert "squares-ood" in text and "probe:hf-image" in text
    assert len(rep.results) >= 2 * len(rep.training_sets)


# --------------------------------------------------------------------------------------------------- audit


def test_audit_images_finds_a_colour_artifact(tmp_path: Path) -> None:
    """Red squares vs blue discs: the colour-only view alone predicts the class (a colour artifact), a control
    set where the colours are shuffled across classes leaves it at chance; PECO and t-SNE run on embeddings."""
    paths, y = square_images(tmp_path / "d", n_per_class=15)
    hist = audit_images_mod.colour_histograms(paths)
    assert hist.shape == (30, 64) and np.allclose(hist.sum(axis=1), 1)
    rng = np.random.default_rng(0)
    emb = rng.normal(size=(30, 16)).astype(np.float32) + y[:, None]
    from aflite.audit import AuditConfig
    from aflite.audit.results import ViewAudit

    def view(labels: np.ndarray, tsne_sample: int) -> ViewAudit:
        cfg = AuditConfig(featurizer="precomputed", n_folds=3, n_components=5, n_clusters=4, tsne_sample=tsne_sample,
                          show_progress=False)
        return audit_images_mod.audit_image_dataset(paths, labels, emb, cfg).views[audit_images_mod.IMAGE_VIEW]

    va = view(y, 30)
    assert va.metrics.biased_accuracy == 1.0 and va.metrics.majority_accuracy == 0.5
    assert 0 <= va.peco.score and va.tsne is not None and len(va.tsne) == 30
    shuffled = rng.permutation(y)  # labels unrelated to colour
    va2 = view(shuffled, 0)
    assert va2.metrics.biased_accuracy < 0.8 and va2.tsne is None


def cued_shapes(folder: Path, n_per_class: int = 30, cue: bool = True, size: int = 32, seed: int = 0,
                names: tuple[str, str] = ("square", "disc")) -> list[str]:
    """Squares (class 0) and discs (class 1). With ``cue`` each class has its colour (red / blue); without, half
    of each class is red and half blue, so colour says nothing about the class."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[:size, :size]
    paths = []
    for label, name in enumerate(names):
        (folder / name).mkdir(parents=True, exist_ok=True)
        for i in range(n_per_class):
            img = np.zeros((size, size, 3), dtype=np.uint8)
            r = int(rng.integers(4, size // 3))
            cy, cx = (int(v) for v in rng.integers(r, size - r, size=2))
            square = (np.abs(yy - cy) < r) & (np.abs(xx - cx) < r)
            shape = square if label == 0 else (yy - cy) ** 2 + (xx - cx) ** 2 <= r * r
            channel = (0 if label == 0 else 2) if cue else 2 * (i % 2)  # cue-free: half of each class red
            img[shape, channel] = 220
            p = folder / name / f"{i:03d}.png"
            PIL.fromarray(img).save(p)
            paths.append(str(p))
    return paths


AUDIT_SMALL = ["--n-folds", "3", "--n-components", "5", "--n-clusters", "4", "--peco-shuffles", "10",
               "--tsne-sample", "40", "--quiet", "--device", "cpu"]


def test_audit_cli_image_folder_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`aflite audit FOLDER` on a colour-cued folder (tiny random ViT as hf-image): the common output files, a
    colour-only biased model far above the majority rate, PECO with its null, a t-SNE PNG, class names escaped
    in the HTML report."""
    pytest.importorskip("torch")
    cued_shapes(tmp_path / "d", n_per_class=20, names=("<i>sq&", "disc"))
    model = str(tiny_vit(tmp_path / "vit"))
    out = tmp_path / "out"
    rc = _run(["audit", str(tmp_path / "d"), "--out", str(out), "--model-path", model, *AUDIT_SMALL])
    assert rc == 0
    for f in ("results.json", "summary.md", "report.html", "tsne.png"):
        assert (out / f).is_file(), f
    assert any((out / "cache").iterdir())
    assert (out / "tsne.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    res = json.loads((out / "results.json").read_text())
    assert res["command"] == "audit" and res["modality"] == "image" and res["featurizer"] == "hf-image"
    v = res["results"][0]["views"]["colour"]
    assert res["results"][0]["n"] == 40 and v["condition"] == "colour" and v["tra"] is None
    assert v["majority_accuracy"] == 0.5 and v["biased_accuracy"] - v["majority_accuracy"] > 0.4
    assert v["peco_null_mean"] is not None and v["peco"] >= 0 and 0 <= v["nba"] <= 1
    assert "colour-only" in capsys.readouterr().out and "colour-only" in (out / "summary.md").read_text()
    html = (out / "report.html").read_text()
    markup = re.sub(r"<script>.*?</script>", "", html, flags=re.S)  # the page's text, plotly.js's own code aside
    assert "&lt;i&gt;sq&amp;" in html and "<i>sq" not in html and "TRA" not in markup


def test_audit_images_precomputed_cue_free_stays_at_chance(tmp_path: Path) -> None:
    """The library entry point (commands.audit.audit_file detects the folder) with precomputed embeddings: on a set
    whose colours are drawn independently of the class the colour-only model stays near the majority rate,
    while the same audit on the cued set is far above it."""
    from aflite.audit import AuditConfig
    from aflite.commands.audit import audit_file

    cfg = AuditConfig(n_folds=3, n_components=5, n_clusters=4, peco_shuffles=10, tsne_sample=0,
                      show_progress=False)
    deltas = {}
    for cue in (True, False):
        folder = tmp_path / f"cue{cue}"
        cued_shapes(folder, n_per_class=30, cue=cue, seed=1)
        ds = images.load_image_dataset(folder)
        emb = np.random.default_rng(0).normal(size=(len(ds), 8)).astype(np.float32)
        np.save(tmp_path / f"e{cue}.npy", emb)
        (tmp_path / f"e{cue}.txt").write_text("".join(f"{i}\n" for i in ds.ids))
        run = audit_file(folder, tmp_path / f"out{cue}", AuditConfig(**{**cfg.to_dict(), "featurizer": "precomputed",
                                                                         "views": ("hypothesis",)}),
                         featurizer_options={"embeddings": str(tmp_path / f"e{cue}.npy"),
                                             "embedding_ids": str(tmp_path / f"e{cue}.txt")}, show_progress=False)
        m = run.results[0].views["colour"].metrics
        deltas[cue] = m.biased_accuracy - m.majority_accuracy
        assert m.majority_accuracy == 0.5 and abs(m.normal_delta_maj) < 0.2  # random embeddings: near chance
        assert not (tmp_path / f"out{cue}" / "tsne.png").exists() and run.metrics["tsne_plots"] == {}
        # the library writes the command's files itself: results.json (envelope + figures) and summary.md
        res = json.loads((tmp_path / f"out{cue}" / "results.json").read_text())
        assert res["command"] == "audit" and res["results"][0]["name"] == "D"
        assert "colour-only" in (tmp_path / f"out{cue}" / "summary.md").read_text()
    assert deltas[True] > 0.4 and deltas[False] < 0.1, deltas  # cue-free: not above chance


def test_audit_cli_bad_image_exit_2_one_line_or_skipped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cued_shapes(tmp_path / "d", n_per_class=10)
    (tmp_path / "d" / "disc" / "zz.png").write_bytes(b"garbage")
    rc = _run(["audit", str(tmp_path / "d"), "--out", str(tmp_path / "o1"), *AUDIT_SMALL])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert rc == 2 and len(err) == 1 and err[0].startswith("aflite audit: error: ") and "zz.png" in err[0]
    assert "not a readable image" in err[0]
    assert not any((tmp_path / "o1" / f).exists() for f in ("results.json", "report.html", "metrics.json"))
    ds = images.load_image_dataset(tmp_path / "d", skip_bad_images=True)
    np.save(tmp_path / "e.npy", np.random.default_rng(0).normal(size=(len(ds), 4)).astype(np.float32))
    (tmp_path / "e.txt").write_text("".join(f"{i}\n" for i in ds.ids))
    rc = _run(["audit", str(tmp_path / "d"), "--out", str(tmp_path / "o2"), "--skip-bad-images", "--featurizer",
               "precomputed", "--embeddings", str(tmp_path / "e.npy"), "--embedding-ids", str(tmp_path / "e.txt"),
               *AUDIT_SMALL])
    assert rc == 0, capsys.readouterr().err
    assert (tmp_path / "o2" / "bad_images.txt").read_text().strip().endswith("zz.png")
    assert json.loads((tmp_path / "o2" / "results.json").read_text())["bad_images"]["count"] == 1


@pytest.mark.parametrize("extra, message", [
    (["--no-tra"], "--tra/--no-tra: text-only option"),
    (["--views", "hypothesis", "--top-k-tokens", "3"], "--views, --top-k-tokens: text-only option"),
    (["--featurizer", "ngram"], "--featurizer ngram on images"),
    (["--featurizer", "efficientnet-lite0", "--model-path", "m"], "give --featurizer hf-image"),
])
def test_audit_cli_text_only_options_refused_on_images(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      extra: list[str], message: str) -> None:
    cued_shapes(tmp_path / "d", n_per_class=3)
    rc = _run(["audit", str(tmp_path / "d"), "--out", str(tmp_path / "o"), *extra, "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and message in err[0], err
    assert not (tmp_path / "o").exists()  # refused before --out is created


def test_audit_cli_image_options_refused_on_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tsv = tmp_path / "d.tsv"
    tsv.write_text("sentence1\tsentence2\tgold_label\n" + "a b\tc d\tentailment\n" * 12)
    assert not images.is_image_input(tsv)
    rc = _run(["audit", str(tsv), "--out", str(tmp_path / "o"), "--image-size", "64", "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "--image-size: image option(s)" in err[0]
    rc = _run(["audit", str(tsv), "--out", str(tmp_path / "o"), "--featurizer", "precomputed", "--quiet"])
    assert rc == 2 and "--featurizer precomputed: the audit does not offer it" in capsys.readouterr().err


def test_is_image_input_detects_tables_and_hf_folders(tmp_path: Path) -> None:
    paths = cued_shapes(tmp_path / "img", n_per_class=2)
    table = _table(tmp_path, paths, np.array([0, 0, 1, 1]))
    assert images.is_image_input(tmp_path / "img") and images.is_image_input(table)
    text = tmp_path / "t.csv"
    text.write_text("premise,hypothesis,label,file\na,b,c,x.png\n")
    assert not images.is_image_input(text) and images.is_image_input(text, path_column="file")
    from aflite.data import modality_of

    assert modality_of(text, reads="image") == "image" and modality_of(text, reads="text") == "text"
    assert not images.is_image_input(tmp_path / "missing.csv")


def test_audit_cli_images_compare_with_a_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--compare RUN on images: D and the run's kept images D(Φ) audited side by side from one featurization,
    a t-SNE map for each."""
    cued_shapes(tmp_path / "d", n_per_class=15)
    ds = images.load_image_dataset(tmp_path / "d")
    np.save(tmp_path / "e.npy", np.random.default_rng(0).normal(size=(len(ds), 6)).astype(np.float32))
    (tmp_path / "e.txt").write_text("".join(f"{i}\n" for i in ds.ids))
    pre = ["--featurizer", "precomputed", "--embeddings", str(tmp_path / "e.npy"), "--embedding-ids",
           str(tmp_path / "e.txt")]
    assert _run(["run", str(tmp_path / "d"), "--out", str(tmp_path / "run"), *pre, "--train-size", "10",
                 "--slice-size", "3", "--target-size", "20", "--n-partitions", "8", "--threshold", "0", "--quiet"]) == 0
    kept = (tmp_path / "run" / "kept_ids.txt").read_text().split()
    out = tmp_path / "a"
    rc = _run(["audit", str(tmp_path / "d"), "--out", str(out), "--compare", str(tmp_path / "run"), *pre,
               "--tsne-sample", "30", *AUDIT_SMALL])
    assert rc == 0, capsys.readouterr().err
    res = json.loads((out / "results.json").read_text())
    assert [r["name"] for r in res["results"]] == ["D", "D(Φ)"]
    assert res["results"][0]["n"] == 30 and res["results"][1]["n"] == len(kept) < 30
    assert res["tsne_plots"] == {"D": "tsne.png", "D(Φ)": "tsne_kept.png"} and (out / "tsne_kept.png").is_file()
    assert "tsne_kept.png" in (out / "summary.md").read_text()


def test_audit_image_table_and_hf_dataset(tmp_path: Path) -> None:
    """The other two layouts run the same audit: a CSV with a path column and a HF dataset with an Image column
    (detected without naming a featurizer or column), with the same figures as the folder they were built from."""
    datasets = pytest.importorskip("datasets")
    from aflite.audit import AuditConfig
    from aflite.commands.audit import audit_file

    paths = cued_shapes(tmp_path / "img", n_per_class=10)
    y = np.repeat([0, 1], 10)
    table = _table(tmp_path, paths, y)
    hf = datasets.Dataset.from_dict({"img": paths, "label": y.tolist()}).cast_column("img", datasets.Image())
    hf.save_to_disk(str(tmp_path / "hf"))
    cfg = AuditConfig(featurizer="precomputed", n_folds=3, n_components=3, n_clusters=3, peco_shuffles=5,
                      tsne_sample=0, show_progress=False)
    emb = np.random.default_rng(0).normal(size=(20, 4)).astype(np.float32)
    figures = []
    for src in (tmp_path / "img", table, tmp_path / "hf"):
        ds = images.load_image_dataset(src)
        np.save(tmp_path / "e.npy", emb)
        (tmp_path / "e.txt").write_text("".join(f"{i}\n" for i in ds.ids))
        run = audit_file(src, tmp_path / f"out-{src.name}", cfg, show_progress=False,
                         featurizer_options={"embeddings": str(tmp_path / "e.npy"),
                                             "embedding_ids": str(tmp_path / "e.txt")})
        m = run.results[0].views["colour"].metrics
        figures.append((m.biased_accuracy, m.normal_accuracy, run.results[0].views["colour"].peco.score))
    assert figures[0][0] == 1.0 and figures[0] == figures[1] == figures[2]


@needs_effnet
def test_audit_cli_default_featurizer_is_efficientnet_lite0(tmp_path: Path) -> None:
    cued_shapes(tmp_path / "d", n_per_class=8)
    out = tmp_path / "out"
    assert _run(["audit", str(tmp_path / "d"), "--out", str(out), "--image-size", "32", *AUDIT_SMALL]) == 0
    res = json.loads((out / "results.json").read_text())
    assert res["featurizer"] == "efficientnet-lite0" and res["embedding_dim"] == 1280
    assert res["results"][0]["config"]["featurizer"] == "efficientnet-lite0"


def test_an_image_dataset_is_a_typed_dataset_with_its_bad_inputs(tmp_path: Path) -> None:
    """Images are a modality of the one Dataset: inputs are image references, bad_inputs the skipped files,
    named through InputError.path (not by parsing the message)."""
    from aflite.data import Dataset

    square_images(tmp_path / "d", n_per_class=4)
    (tmp_path / "d" / "0" / "zz.png").write_bytes(b"not a png")
    with pytest.raises(InputError) as info:
        images.open_image(str(tmp_path / "d" / "0" / "zz.png"))
    assert info.value.path == str(tmp_path / "d" / "0" / "zz.png")
    ds = images.load_image_dataset(tmp_path / "d", skip_bad_images=True)
    assert isinstance(ds, Dataset) and ds.modality == "image" and ds.inputs == ds.texts_a
    assert ds.bad_inputs == ds.bad_images == [str(tmp_path / "d" / "0" / "zz.png")]
    assert len(ds) == 8 and not ds.is_pair


# ------------------------------------------------------------------------- --link-dir: names and folder (issue 25)
def _id_table(folder: Path, ids: list[str]) -> Path:
    paths, y = square_images(folder / "img", n_per_class=4)
    p = folder / "data.csv"
    with open(p, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "image", "label"])
        for i, q, lab in zip(ids, paths, y, strict=True):
            w.writerow([i, Path(q).relative_to(folder).as_posix(), f"c{lab}"])
    return p


def _refused_before_work(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    computed: list[str] = []

    def featurize(*a: object, **k: object) -> None:
        computed.append("featurize")
        raise AssertionError("featurized before the check")

    for where in ("aflite.features.compute.featurize", "aflite.audit.runner.featurize"):  # run/embed, audit
        monkeypatch.setattr(where, featurize)
    return computed


@pytest.mark.parametrize("bad", ["../../x", "a/b", "/abs", "..", "a\x00b"])
def test_link_dir_refuses_ids_that_escape_it_before_any_work(tmp_path, capsys, monkeypatch, bad) -> None:
    table = _id_table(tmp_path, [bad] + [f"r{i}" for i in range(7)])
    computed = _refused_before_work(monkeypatch)
    links = tmp_path / "links" / "L"
    rc = _run(["run", str(table), "--out", str(tmp_path / "out"), "--featurizer", "efficientnet-lite0",
               "--link-dir", str(links), "--id-column", "id", *FILTER])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert rc == 2 and len(err) == 1, err
    assert err[0].startswith("aflite run: error: ")
    # a NUL is refused already when the ids are read (one id per line); the others by the --link-dir check
    assert ("contains a line break or NUL" if "\x00" in bad else "cannot name a link in --link-dir") in err[0]
    assert computed == [] and not (tmp_path / "links").exists() and not (tmp_path / "out").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.csv", "img"]  # nothing written anywhere


def test_link_tree_refuses_an_escaping_id_and_uses_the_umask(tmp_path) -> None:
    table = _id_table(tmp_path, [f"r{i}" for i in range(8)])
    ds = images.load_image_dataset(table, id_column="id")
    old = os.umask(0o022)
    try:
        dest = images.link_tree(ds, np.ones(8, bool), tmp_path / "links" / "L", by_label=True)
    finally:
        os.umask(old)
    assert (dest.stat().st_mode & 0o777) == 0o755  # as mkdir makes it, not mkdtemp's 0700
    ds.ids = np.array(["../../x", *ds.ids[1:]], dtype=object)
    with pytest.raises(InputError, match="id '../../x' contains a '/'"):
        images.link_tree(ds, np.ones(8, bool), tmp_path / "links" / "M", by_label=True)
    assert sorted(p.name for p in (tmp_path / "links").iterdir()) == ["L"]


def test_unwritable_link_dir_is_refused_before_the_run(tmp_path, capsys, monkeypatch) -> None:
    from aflite.rundir import lock as rundir

    square_images(tmp_path / "d", n_per_class=8)
    ro = tmp_path / "ro"
    ro.mkdir()
    real_access = os.access
    monkeypatch.setattr(rundir.os, "access", lambda p, mode: False if Path(p) == ro else real_access(p, mode))
    computed = _refused_before_work(monkeypatch)
    rc = _run(["run", str(tmp_path / "d"), "--out", str(tmp_path / "out"), "--featurizer", "efficientnet-lite0",
               "--link-dir", str(ro / "links"), *FILTER])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert rc == 2 and len(err) == 1 and "--link-dir" in err[0] and "is not writable" in err[0], err
    assert computed == [] and not (tmp_path / "out").exists()
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("mine")
    rc = _run(["run", str(tmp_path / "d"), "--out", str(tmp_path / "out"), "--featurizer", "efficientnet-lite0",
               "--link-dir", str(tmp_path / "full"), *FILTER])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert rc == 2 and "must be a new or empty folder" in err[0] and computed == []
    assert (tmp_path / "full" / "x").read_text() == "mine"


@pytest.mark.parametrize("command", ["run", "embed"])
def test_image_options_on_text_data_are_refused_in_one_line(tmp_path, capsys, command):
    """#50: --image-size and --skip-bad-images were ignored without a word on a text file (audit refused them);
    run and embed refuse them in one line naming the flags (the keywords in Python), before --out exists."""
    import aflite
    from aflite.cli import main
    from aflite.errors import ParameterError

    tsv = tmp_path / "d.tsv"
    tsv.write_text("premise\thypothesis\tlabel\n" + "".join(
        f"the premise number{i % 7}\ta hypothesis word{i}\t{'ab'[i % 2]}\n" for i in range(60)))
    out = tmp_path / "out"
    for flags, named in ((["--image-size", "64"], "--image-size"), (["--skip-bad-images"], "--skip-bad-images"),
                         (["--image-size", "64", "--skip-bad-images"], "--image-size, --skip-bad-images")):
        assert main([command, str(tsv), "--out", str(out), "-f", "ngram", "--quiet", *flags]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"error: {named}: image option(s), but " in err[0] and "read as text" in err[0], err
        assert not out.exists()
    assert main([command, str(tsv), "--out", str(out), "-f", "ngram", "--quiet", "--image-size", "224",
                 *(["--no-probe"] if command == "run" else [])]) == 0
    fn = {"run": lambda **kw: aflite.run(tsv, tmp_path / "py", featurizer="ngram", show_progress=False, **kw),
          "embed": lambda **kw: aflite.embed(tsv, tmp_path / "py", featurizer="ngram", show_progress=False, **kw)}
    given = {"run": {"dataset_options": {"skip_bad_images": True}}, "embed": {"image_size": 64}}[command]
    with pytest.raises(ParameterError, match=r"^(skip_bad_images|image_size): image option\(s\), but .*path_column="):
        fn[command](**given)
    assert not (tmp_path / "py").exists()


def test_an_image_size_among_run_s_featurizer_options_on_text_is_refused(tmp_path):
    """From Python the image size reaches run as a featurizer option (a command-wide one, routed where taken): on
    data read as text it was dropped unread; refused in one line, before out exists."""
    import aflite
    from aflite.errors import ParameterError

    tsv = tmp_path / "d.tsv"
    tsv.write_text("premise\thypothesis\tlabel\n" + "".join(
        f"the premise number{i % 7}\ta hypothesis word{i}\t{'ab'[i % 2]}\n" for i in range(60)))
    with pytest.raises(ParameterError, match=r"^image_size: image option\(s\), but .* is read as text"):
        aflite.run(tsv, tmp_path / "py", featurizer="ngram", featurizer_options={"image_size": 64},
                   show_progress=False)
    assert not (tmp_path / "py").exists()


def test_text_options_on_image_data_are_refused_in_one_line(tmp_path, capsys):
    """The reverse of the above: --text-a, --file-format, --max-cell-bytes (label_map= in Python) given for data
    read as images were dropped unread; refused in one line naming them, before --out is touched (a folder that
    holds the user's file keeps it)."""
    from aflite.cli import main
    from aflite.data import open_dataset

    for k in range(6):
        (tmp_path / "digits" / "ab"[k % 2]).mkdir(parents=True, exist_ok=True)
        PIL.new("RGB", (8, 8), (40 * k, 0, 0)).save(tmp_path / "digits" / "ab"[k % 2] / f"{k}.png")
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    for command in ("run", "embed"):
        assert main([command, str(tmp_path / "digits"), "--out", str(out), "--overwrite", "-f", "efficientnet-lite0",
                     "--file-format", "tsv", "--max-cell-bytes", "9"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "error: --file-format, --max-cell-bytes: text option(s), but " in err[0] and \
            "is read as images" in err[0], err
        assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
    with pytest.raises(ParameterError, match=r"^text_a, label_map: text option\(s\), but .* is read as images"):
        open_dataset(tmp_path / "digits", text_a="x", label_map={"a": "b"})
