"""Φ in shards on a Dask cluster (aflite.cluster.shards, aflite.features.shards): the same rows in the same order as
one process, finished shards never recomputed, damaged ones recomputed, and with MiniLM the same features bit for
bit."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

pytest.importorskip("dask.distributed")

from aflite.cluster.shards import concat_shards, run_shards, shard_bounds, shards_to_npy  # noqa: E402
from aflite.errors import ParameterError  # noqa: E402
from aflite.features.shards import ShardedTransform, check_shardable  # noqa: E402


class CountingFeaturizer:
    """A featurizer whose row i depends on its text only (and whose calls are counted in a file, since workers get
    their own copies): enough to check order, resume and damage without loading a model."""

    name = "counting"
    resumable = True

    def __init__(self, log: Path) -> None:
        self.log = str(log)
        self.show_progress = True

    def transform(self, a: list[str], b: list[str] | None = None, *, progress: Any = None) -> np.ndarray:
        with open(self.log, "a", encoding="utf-8") as fh:
            fh.write(f"{len(a)}\n")
        out = np.empty((len(a), 4), dtype=np.float32)
        for i, t in enumerate(a):
            d = hashlib.sha256((t + "|" + (b[i] if b is not None else "")).encode()).digest()
            out[i] = np.frombuffer(d[:16], dtype=np.uint32) / np.float32(2**32)
        return out


def calls(log: Path) -> list[int]:
    return [int(x) for x in log.read_text().split()] if log.exists() else []


@pytest.fixture(scope="module")
def threads_cluster():
    """Two in-process workers (fast to start): enough for order, resume and damage."""
    from dask.distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0",
                           silence_logs=40)
    client = Client(cluster)
    yield SimpleNamespace(client=client)
    client.close()
    cluster.close()


def test_shard_bounds_depend_on_rows_and_size_only():
    assert shard_bounds(10, 4) == [(0, 4), (4, 8), (8, 10)]
    assert shard_bounds(8, 4) == [(0, 4), (4, 8)]
    with pytest.raises(ParameterError):
        shard_bounds(5, 0)


def test_shards_keep_row_order_and_match_the_chunk_loop(tmp_path, threads_cluster):
    a = [f"premise {i}" for i in range(23)]
    b = [f"hypothesis {i % 5}" for i in range(23)]
    feat = CountingFeaturizer(tmp_path / "calls.txt")
    paths, rep = run_shards(threads_cluster, feat, a, b, tmp_path / "s", "k", 5, show_progress=False)
    x = concat_shards(paths)
    one = CountingFeaturizer(tmp_path / "alone.txt")
    expected = np.vstack([one.transform(a[lo:hi], b[lo:hi]) for lo, hi in shard_bounds(23, 5)])
    assert x.dtype == np.float32 and x.flags.c_contiguous
    assert np.array_equal(x, expected)
    assert (rep.shards, rep.computed, rep.reused) == (5, 5, 0)
    assert sorted(calls(tmp_path / "calls.txt")) == [3, 5, 5, 5, 5]  # one transform call per shard, no more
    assert sum(rep.per_worker.values()) == 5 and 1 <= rep.loads <= 2  # each worker made its featurizer once
    manifest = json.loads(paths[0].with_suffix(".json").read_text())
    assert (manifest["lo"], manifest["hi"], manifest["shape"]) == (0, 5, [5, 4])
    dest = shards_to_npy(paths, tmp_path / "features.npy")
    assert np.array_equal(np.load(dest), expected)


def test_resume_skips_finished_shards_and_recomputes_damaged_ones(tmp_path, threads_cluster):
    a = [f"text {i}" for i in range(20)]
    log = tmp_path / "calls.txt"
    folder = tmp_path / "s"
    paths, _ = run_shards(threads_cluster, CountingFeaturizer(log), a, None, folder, "k", 4, show_progress=False)
    first = concat_shards(paths)
    assert len(calls(log)) == 5

    _, rep = run_shards(threads_cluster, CountingFeaturizer(log), a, None, folder, "k", 4, show_progress=False)
    assert (rep.reused, rep.computed) == (5, 0)
    assert len(calls(log)) == 5  # not one transform more

    paths[1].write_bytes(paths[1].read_bytes()[:40])  # a truncated file
    arr = np.load(paths[3])
    arr[0, 0] += 1.0
    np.save(paths[3], arr)  # a readable file whose values are not the manifest's
    paths[4].with_suffix(".json").unlink()  # values without a manifest: an interrupted write
    _, rep = run_shards(threads_cluster, CountingFeaturizer(log), a, None, folder, "k", 4, show_progress=False)
    assert (rep.reused, rep.computed) == (2, 3)
    assert calls(log)[5:] == [4, 4, 4]
    assert np.array_equal(concat_shards(paths), first)

    # other rows under the same names (another dataset, or another featurizer key) are not taken for finished
    b = list(a)
    b[9] = "changed"
    _, rep = run_shards(threads_cluster, CountingFeaturizer(log), b, None, folder, "k", 4, show_progress=False)
    assert (rep.reused, rep.computed) == (4, 1)
    _, rep = run_shards(threads_cluster, CountingFeaturizer(log), b, None, folder, "other", 4, show_progress=False)
    assert rep.computed == 5


def test_a_failing_shard_raises_its_own_error(tmp_path, threads_cluster):
    class Broken(CountingFeaturizer):
        def transform(self, a: list[str], b: list[str] | None = None, *, progress: Any = None) -> np.ndarray:
            raise ParameterError("bad option")

    with pytest.raises(ParameterError, match="bad option"):
        run_shards(threads_cluster, Broken(tmp_path / "c.txt"), ["x"] * 3, None, tmp_path / "s", "k", 2,
                   show_progress=False)


def test_featurizers_without_shards_are_refused_in_one_line():
    check_shardable("minilm")
    with pytest.raises(ParameterError, match="ngram fits its IDF"):
        check_shardable("ngram")


def test_featurize_hook_needs_a_cache(threads_cluster):
    with pytest.raises(ParameterError, match="cache"):
        ShardedTransform(threads_cluster)(CountingFeaturizer(Path("/nonexistent")), ["a"], None, None, "s", 1, False)


def test_cli_refuses_ngram_on_a_cluster_before_writing(tmp_path, capsys):
    from aflite.cli import main

    data = tmp_path / "d.tsv"
    data.write_text("sentence1\tsentence2\tgold_label\na\tb\tentailment\nc\td\tneutral\n")
    out = tmp_path / "out"
    assert main(["embed", str(data), "--out", str(out), "--featurizer", "ngram", "--cluster", "local"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--cluster" in err[0] and "ngram" in err[0]
    assert not out.exists()


def test_cli_unreachable_scheduler_is_one_line_exit_2(tmp_path, capsys):
    import dask

    from aflite.cli import main

    data = tmp_path / "d.tsv"
    data.write_text("sentence1\tsentence2\tgold_label\na\tb\tentailment\nc\td\tneutral\n")
    out = tmp_path / "out"
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        code = main(["embed", str(data), "--out", str(out), "--featurizer", "minilm", "--cluster",
                     "tcp://127.0.0.1:9", "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and "no Dask scheduler answered" in err[0] and "tcp://127.0.0.1:9" in err[0]
    assert not (out / "features.npy").exists()


# ----------------------------------------------------------------------------- MiniLM on worker processes


@pytest.fixture(scope="module")
def minilm(minilm_model_path: Path) -> None:
    """MiniLM tests skip without the [text] extra or the model package (conftest.minilm_model_path)."""


PAIRS = [(f"A person number {i} is {'walking' if i % 3 else 'sitting on a long wooden bench near the river'}.",
          f"Someone {'moves' if i % 2 else 'rests'} {'outside' * (1 + i % 4)}.") for i in range(40)]


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["torch", "onnx-int8"])
def test_minilm_sharded_is_bit_identical_to_one_process(tmp_path, minilm, backend):
    from aflite.core.backends.dask import DaskExecutor
    from aflite.encoders.onnx_text import onnx_available
    from aflite.features import featurize

    if backend != "torch" and not onnx_available():
        pytest.skip("onnxruntime not installed")
    a = [p for p, _ in PAIRS]
    b = [h for _, h in PAIRS]
    kw = dict(chunk_size=12, show_progress=False, backend=backend, batch_size=4)
    alone = featurize(a, b, "minilm", "pair", cache_dir=tmp_path / "one", **kw)
    with DaskExecutor(n_workers=2) as ex:
        shards = ShardedTransform(ex)
        spread = featurize(a, b, "minilm", "pair", cache_dir=tmp_path / "two", shards=shards, **kw)
    assert shards.report is not None
    assert (shards.report.shards, shards.report.computed) == (4, 4)
    assert len(shards.report.per_worker) == 2 and shards.report.loads == 2  # both worked, each loaded once
    assert spread.X.dtype == alone.X.dtype == np.float32
    assert np.array_equal(spread.X, alone.X)  # bit for bit
    assert not list((tmp_path / "two").glob("*.parts"))  # the shards go once the whole matrix is cached


@pytest.mark.slow
def test_fine_tuned_warmup_encoder_is_sent_to_workers_and_gives_the_same_bits(tmp_path, minilm):
    from aflite.core.backends.dask import DaskExecutor
    from aflite.features import make_featurizer
    from aflite.threads import thread_policy

    a = [p for p, _ in PAIRS[:30]]
    b = [h for _, h in PAIRS[:30]]
    feat = make_featurizer("warmup", max_steps=2, batch_size=8, embed_batch_size=4, show_progress=False,
                           device="cpu")
    feat.fit(a[:12], b[:12], [i % 3 for i in range(12)])  # the lead fine-tunes, as featurize does
    with thread_policy(2):
        alone = np.vstack([feat.transform(a[lo:hi], b[lo:hi]) for lo, hi in shard_bounds(30, 8)])
    with DaskExecutor(n_workers=2) as ex:
        paths, rep = run_shards(ex, feat, a, b, tmp_path / "s", "warm", 8, show_progress=False)
    assert rep.computed == 4 and rep.loads == len(rep.per_worker)
    assert np.array_equal(concat_shards(paths), alone)


def _pairs_file(path: Path, n: int) -> Path:
    labels = ("entailment", "neutral", "contradiction")
    rows = [f"{p}\t{h}\t{labels[i % 3]}\tp{i}" for i, (p, h) in enumerate((PAIRS * 10)[:n])]
    path.write_text("sentence1\tsentence2\tgold_label\tpairID\n" + "\n".join(rows) + "\n")
    return path


@pytest.mark.slow
def test_cli_embed_on_a_local_cluster_writes_the_same_features(tmp_path, minilm, capsys):
    from aflite.cli import main

    data = _pairs_file(tmp_path / "d.tsv", 30)
    common = ["--featurizer", "minilm", "--backend", "torch", "--chunk-size", "8", "--quiet"]
    assert main(["embed", str(data), "--out", str(tmp_path / "one"), *common]) == 0
    assert main(["embed", str(data), "--out", str(tmp_path / "two"), *common, "--cluster", "local:2"]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert "4 shards on" in line
    one, two = np.load(tmp_path / "one" / "features.npy"), np.load(tmp_path / "two" / "features.npy")
    assert np.array_equal(one, two)
    assert (tmp_path / "one" / "ids.txt").read_text() == (tmp_path / "two" / "ids.txt").read_text()
    res = json.loads((tmp_path / "two" / "results.json").read_text())
    assert res["cluster"]["shards"] == 4 and res["cluster"]["computed"] == 4


@pytest.mark.slow
def test_run_with_a_cluster_filters_there_and_featurizes_ngram_here(tmp_path, capsys):
    from aflite.commands.run import run
    from aflite.core.backends.dask import DaskExecutor

    data = _pairs_file(tmp_path / "d.tsv", 120)
    kw = dict(featurizer="ngram", probe=False, show_progress=False)
    params = {"n_partitions": 4, "target_size": 80, "slice_size": 10, "random_state": 3}
    alone = run(data, tmp_path / "alone", params=params, **kw)
    with DaskExecutor(n_workers=1) as ex:
        spread = run(data, tmp_path / "spread", params={**params, "executor": ex}, **kw)
        assert ex.client.status == "running"  # an executor passed in is its owner's to close
    assert "runs in this process" in capsys.readouterr().err
    assert np.array_equal(alone.keep, spread.keep) and 0 < alone.keep.sum() < 120


@pytest.mark.slow
def test_cli_embed_images_on_a_local_cluster_is_bit_identical(tmp_path):
    pytest.importorskip("torch")
    from test_images import _run, square_images, tiny_vit

    square_images(tmp_path / "d", n_per_class=8)
    base = ["embed", str(tmp_path / "d"), "--featurizer", "hf-image", "--model-path", str(tiny_vit(tmp_path / "vit")),
            "--chunk-size", "5", "--quiet", "--device", "cpu"]
    assert _run([*base, "--out", str(tmp_path / "one")]) == 0
    assert _run([*base, "--out", str(tmp_path / "two"), "--cluster", "local:2"]) == 0
    one, two = np.load(tmp_path / "one" / "features.npy"), np.load(tmp_path / "two" / "features.npy")
    assert one.shape == (16, 32) and np.array_equal(one, two)
    assert (tmp_path / "one" / "ids.txt").read_text() == (tmp_path / "two" / "ids.txt").read_text()
    assert json.loads((tmp_path / "two" / "results.json").read_text())["cluster"]["computed"] == 4
    assert not (tmp_path / "two" / "cache" / "shards" / "hf-image").exists()
    assert not list((tmp_path / "two" / "cache" / "shards").glob("*"))  # assembled, then removed


def test_featurizers_pickle_after_an_onnx_transform(tmp_path, minilm):
    """A featurizer that already embedded through ONNX Runtime still pickles (the session is left out and rebuilt),
    so it can be sent to Dask workers after the lead used it."""
    import pickle

    pytest.importorskip("onnxruntime")
    from aflite.features import make_featurizer

    a = [p for p, _ in PAIRS[:6]]
    b = [h for _, h in PAIRS[:6]]
    feat = make_featurizer("minilm", backend="onnx-int8", show_progress=False, device="cpu", export_dir=tmp_path)
    before = feat.transform(a, b)
    assert feat._runner is not None
    copy = pickle.loads(pickle.dumps(feat))
    assert copy._runner is None
    assert np.array_equal(copy.transform(a, b), before)
