"""Tests for aflite.encoders.onnx_text (the encoders' ONNX Runtime backends) and the embed bench's pieces:
the default backend's rule, the CLI routing of --backend, and agreement of each backend's Φ with torch's on a
small sample (skipped without the [onnx] extra or the bundled MiniLM)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tiny_models import make_tiny_model

from aflite import features as F
from aflite.encoders import onnx_text as OB
from aflite.errors import ParameterError

# premise/hypothesis pairs written for these tests (entailment, neutral, contradiction of everyday scenes)
PAIRS = [
    ("A man in a red jacket is riding a bicycle down a busy street.", "A person is cycling outdoors."),
    ("A man in a red jacket is riding a bicycle down a busy street.", "The man is sleeping at home."),
    ("Two children are building a sandcastle on the beach.", "Kids are playing near the sea."),
    ("Two children are building a sandcastle on the beach.", "The children are brothers on holiday."),
    ("A woman slices vegetables in a small kitchen.", "Someone is preparing food."),
    ("A woman slices vegetables in a small kitchen.", "A woman is swimming laps in a pool."),
    ("An old dog sleeps under a wooden table.", "An animal is resting."),
    ("An old dog sleeps under a wooden table.", "The dog is chasing a cat across the yard."),
    ("A crowd watches a street musician playing guitar at night.", "People are listening to music."),
    ("A crowd watches a street musician playing guitar at night.", "The musician is famous."),
    ("Three workers in orange vests repair a road.", "Road work is happening."),
    ("Three workers in orange vests repair a road.", "The workers are on a lunch break in a cafe."),
    ("A girl in a blue dress jumps over a puddle after the rain.", "A child is outside."),
    ("A girl in a blue dress jumps over a puddle after the rain.", "It is a sunny dry afternoon in the desert."),
    ("A chef plates a dessert with strawberries and cream.", "Food is being served."),
    ("A chef plates a dessert with strawberries and cream.", "The chef is competing in a televised contest."),
]


def test_default_backend_rule(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(OB, "onnx_available", lambda: True)
    assert OB.resolve_backend(None, "cpu") == OB.CPU_DEFAULT == "onnx-int8"
    assert OB.resolve_backend("auto", "cuda") == "torch"  # torch stays the default on a GPU
    assert OB.resolve_backend("torch", "cpu") == "torch" and OB.resolve_backend("onnx", "cpu") == "onnx"
    with pytest.raises(ParameterError, match="runs on the CPU"):
        OB.resolve_backend("onnx-int8", "cuda")
    with pytest.raises(ParameterError, match="unknown backend"):
        OB.resolve_backend("tensorrt", "cpu")
    monkeypatch.setattr(OB, "onnx_available", lambda: False)
    monkeypatch.setattr(OB, "_NOTED", set())  # a fresh process: an earlier test may have said it already (once each)
    assert capsys.readouterr().err == ""
    assert OB.resolve_backend(None, "cpu") == "torch"  # extra missing: torch, said in one line
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "aflite[onnx]" in err
    with pytest.raises(ParameterError, match=r"pip install 'aflite\[onnx\]'"):
        OB.resolve_backend("onnx", "cpu")


@pytest.mark.parametrize("name", ["minilm", "warmup", "efficientnet-lite0"])
def test_each_encoder_resolves_its_backend_once(name: str, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """The default is resolved once per featurizer (features.base.BackendEncoder): without the extra the one line
    saying so is printed once, however often the backend is asked for (validation, cache key, transform)."""
    import pickle

    monkeypatch.setattr(OB, "onnx_available", lambda: False)
    feat = F.make_featurizer(name, device="cpu", show_progress=False)
    for _ in range(3):
        assert feat.resolved_backend() == "torch"
        feat.get_options()
    assert capsys.readouterr().err.count("aflite[onnx]") <= 1
    assert pickle.loads(pickle.dumps(feat)).resolved_backend() == "torch"


def test_backend_is_a_declared_minilm_option_routed_from_the_cli() -> None:
    from aflite.cli import build_parser
    from aflite.cli.run import pipeline_kwargs
    from aflite.features.registry import featurizer_options

    assert featurizer_options("minilm", backend="onnx", device="cpu") == {"backend": "onnx", "device": "cpu"}
    assert featurizer_options("ngram", backend="auto") == {}
    from aflite.errors import ParameterError

    with pytest.raises(ParameterError, match="--featurizer ngram runs no encoder"):  # never ignored silently
        featurizer_options("ngram", backend="onnx")
    args = build_parser().parse_args(["run", "d.tsv", "--out", "o", "--featurizer", "minilm", "--backend",
                                      "onnx-int8"])
    with pipeline_kwargs(args) as kwargs:
        assert kwargs["featurizer_options"]["backend"] == "onnx-int8"
    args = build_parser().parse_args(["embed", "d.tsv", "--out", "o", "--featurizer", "minilm", "--backend", "torch"])
    assert args.backend == "torch"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "d.tsv", "--out", "o", "--backend", "fp16"])


def test_flops_per_token_of_minilm() -> None:
    from types import SimpleNamespace

    from aflitebench.bench_embed import flops_per_token

    cfg = SimpleNamespace(hidden_size=384, intermediate_size=1536, num_hidden_layers=6)
    assert flops_per_token(cfg) == pytest.approx(21.23e6, rel=1e-3)  # the issue's ~21 MFLOP per token


@pytest.fixture(scope="module")
def minilm(minilm_model_path: Path) -> Path:
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    return minilm_model_path


def test_onnx_backends_agree_with_torch_on_a_small_sample(minilm: Path, tmp_path: Path) -> None:
    a, b = [p for p, _ in PAIRS], [h for _, h in PAIRS]
    x = {be: F.featurize(a, b, "minilm", "pair", cache_dir=tmp_path, show_progress=False, backend=be, batch_size=4)
         for be in ("torch", "onnx", "onnx-int8")}
    ref = x["torch"].X
    for be in ("onnx", "onnx-int8"):
        assert x[be].X.shape == ref.shape and x[be].X.dtype == np.float32
        assert np.allclose(np.linalg.norm(x[be].X, axis=1), 1, atol=1e-5)
    cos32 = (x["onnx"].X * ref).sum(axis=1)
    cos8 = (x["onnx-int8"].X * ref).sum(axis=1)
    assert cos32.min() > 0.99999  # fp32: the same function up to float rounding
    assert cos8.mean() >= 0.99 and cos8.min() >= 0.98  # int8: the agreement bar of the default
    assert not np.array_equal(x["onnx-int8"].X, x["onnx"].X)  # really quantised
    # the three are cached under different keys (the backend is part of a non-torch key)
    assert len(list(tmp_path.glob("minilm-pair-*.npy"))) == 3
    # one export (by weights hash) and its int8 sibling in the run's cache, reused by the next featurizer
    files = sorted(p.name for p in (tmp_path / "onnx").glob("*.onnx"))
    assert len(files) == 2 and files[0].endswith("-int8all.onnx")  # MiniLM: every MatMul int8
    mtimes = {p: p.stat().st_mtime_ns for p in (tmp_path / "onnx").glob("*.onnx")}
    feat = F.make_featurizer("minilm", backend="onnx-int8", show_progress=False, export_dir=tmp_path / "onnx",
                             batch_size=4, num_threads=1)
    again = feat.transform(a, b)
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "onnx").glob("*.onnx")} == mtimes
    # the same bits for the same rows and batches, whatever the number of threads (one thread per batch). Dynamic
    # int8 scales activations per batch, so a row's Φ does depend on its batch neighbours (slightly): compare
    # like with like
    assert np.array_equal(again, x["onnx-int8"].X)
    alone = feat.transform(a[:3], b[:3])
    assert (alone * x["onnx-int8"].X[:3]).sum(axis=1).min() > 0.99


def test_minilm_int8_quantises_every_matmul_and_quantize_int8_can_keep_the_down_projections(
        minilm: Path, tmp_path: Path) -> None:
    import onnx

    feat = F.make_featurizer("minilm", backend="onnx-int8", show_progress=False, export_dir=tmp_path)
    feat.transform(["a short sentence"])
    fp32 = next(p for p in tmp_path.glob("*.onnx") if not p.name.endswith("-int8all.onnx"))
    kept = OB.down_projections(onnx.load(str(fp32)))
    assert len(kept) == 6  # one FFN down-projection (1536 -> 384) per layer of MiniLM-L6

    def ops(path: Path) -> tuple[dict[str, int], int]:
        model = onnx.load(str(path))
        count: dict[str, int] = {}
        for node in model.graph.node:
            count[node.op_type] = count.get(node.op_type, 0) + 1
        return count, sum(1 for n in model.graph.node if n.name in kept and n.op_type == "MatMul")

    every, fp32_down = ops(fp32.with_name(fp32.stem + "-int8all.onnx"))  # what minilm's onnx-int8 runs
    assert every.get("MatMulInteger", 0) >= 6 * 6 and fp32_down == 0  # q, k, v, attention out, up, down
    some, fp32_down = ops(OB.quantize_int8(fp32))  # the default of quantize_int8 (the warm-up encoder's)
    assert some.get("MatMulInteger", 0) >= 6 * 5 and fp32_down == 6


@pytest.mark.slow  # an export, a fusion and a quantisation (~40 s on 2 loaded cores)
def test_fused_export_and_leaves_the_model_as_it_was(minilm: Path, tmp_path: Path) -> None:
    import onnx

    feat = F.make_featurizer("minilm", backend="torch", show_progress=False)
    tok, model = feat.loaded()
    torch = pytest.importorskip("torch")
    attn = model.config._attn_implementation
    path = OB.export_text_model(model, torch, tmp_path, fuse=True)
    assert path.name.endswith("-fused.onnx")
    assert model.config._attn_implementation == attn and not model.training  # restored after the eager export
    ops = {n.op_type for n in onnx.load(str(path)).graph.node}
    assert {"Attention", "SkipLayerNormalization", "BiasGelu"} <= ops  # ORT's BERT fusions applied
    int8 = {n.op_type for n in onnx.load(str(OB.quantize_int8(path))).graph.node}
    assert "QAttention" in int8 and "MatMulInteger" in int8


def test_local_hf_text_model_on_onnx(minilm: Path, tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    model = make_tiny_model(tmp_path / "bert")  # a random 2-layer BERT folder (tests/tiny_models.py)
    a, b = [p for p, _ in PAIRS], [h for _, h in PAIRS]
    x = {be: F.featurize(a, b, "minilm", "pair", cache_dir=tmp_path / "c", show_progress=False, backend=be,
                         model_path=model).X for be in ("torch", "onnx", "onnx-int8")}
    assert x["onnx"].shape == x["torch"].shape == (len(PAIRS), 32)
    assert (x["onnx"] * x["torch"]).sum(axis=1).min() > 0.99999
    assert (x["onnx-int8"] * x["torch"]).sum(axis=1).mean() > 0.95  # a random tiny model: only 'close'
    names = [p.name for p in (tmp_path / "c" / "onnx").glob("*.onnx")]
    assert len(names) == 2  # its own export (keyed by its weights), not MiniLM's


@pytest.mark.slow  # fine-tunes MiniLM for a few steps, then embeds with each backend (~1 min on 2 cores)
def test_warmup_encoder_embeds_through_onnx_after_fine_tuning(minilm: Path, tmp_path: Path) -> None:
    a, b = [p for p, _ in PAIRS], [h for _, h in PAIRS]
    y = ["entailment", "contradiction"] * (len(PAIRS) // 2)
    out = {}
    for be in ("torch", "onnx", "onnx-int8"):
        f = F.featurize(a, b, "warmup", "pair", cache_dir=tmp_path, show_progress=False, y=y, warmup_size=8,
                        warmup_seed=0, backend=be, max_steps=4, batch_size=4, device="cpu")
        out[be] = f.X
    # one fine-tuning, reused by the three backends (its file is keyed without the backend)
    assert len(list(tmp_path.glob("*.warmup.pt"))) == 1

    def cos(x: np.ndarray) -> np.ndarray:
        ref = out["torch"]
        return np.asarray((x * ref).sum(1) / np.linalg.norm(x, axis=1) / np.linalg.norm(ref, axis=1))

    assert cos(out["onnx"]).min() > 0.99999
    assert cos(out["onnx-int8"]).mean() > 0.99
    # exported from the fine-tuned weights: not the frozen MiniLM's file
    frozen = OB.weights_hash(F.make_featurizer("minilm", backend="torch").loaded()[1])[:24]
    names = [p.name for p in (tmp_path / "onnx").glob("*.onnx")]
    assert len(names) == 2 and not any(frozen in n for n in names)


def test_two_processes_quantising_one_export_do_not_collide(minilm: Path, tmp_path: Path) -> None:
    """Dask workers sharing a cache may quantise the same export at once; quantize_dynamic writes and deletes a
    "<input>-inferred.onnx" beside its input, so each process works on its own link of the input."""
    import shutil
    from concurrent.futures import ProcessPoolExecutor

    pytest.importorskip("transformers")
    model = make_tiny_model(tmp_path / "bert")  # a random 2-layer BERT folder (tests/tiny_models.py)
    F.featurize(["a short sentence"], None, "minilm", "pair", cache_dir=tmp_path / "c", show_progress=False,
                backend="onnx", model_path=model)
    fp32 = next(p for p in (tmp_path / "c" / "onnx").glob("*.onnx"))
    for round_ in range(3):
        folder = tmp_path / f"r{round_}"
        folder.mkdir()
        shutil.copy(fp32, folder / fp32.name)
        with ProcessPoolExecutor(2) as ex:
            made = list(ex.map(OB.quantize_int8, [folder / fp32.name] * 2))
        assert made[0] == made[1] and made[0].is_file()
        assert sorted(p.name for p in folder.iterdir()) == sorted([fp32.name, made[0].name])  # no leftovers


def test_a_missing_onnxruntime_is_said_once_per_process(monkeypatch, capsys):
    """Issue #49 item 4: one audit resolves the backend per featurization and printed the note three times."""
    from aflite.encoders import onnx_text

    monkeypatch.setattr(onnx_text, "onnx_available", lambda: False)
    monkeypatch.setattr(onnx_text, "_NOTED", set())
    assert [onnx_text.resolve_backend(None, "cpu") for _ in range(3)] == ["torch"] * 3
    err = capsys.readouterr().err
    assert err.count("aflite: encoding with torch, the CPU default without the [onnx] extra") == 1
    assert "not installed" not in err  # issue #59, 5: the quick start's install is no error to report
