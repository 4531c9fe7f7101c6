"""The scale benchmark on a tiny ImageNet-shaped problem: every job runs and reports what it measured."""

from __future__ import annotations

import json

import numpy as np
import pytest

from aflite.bench import write_imagenet_like
from aflite.cli import main


def test_imagenet_like_features_are_written_without_loading_them(tmp_path):
    path = tmp_path / "f.npy"
    y = write_imagenet_like(str(path), n=3000, d=32, n_classes=40, random_state=1)
    X = np.load(path, mmap_mode="r")
    assert X.shape == (3000, 32) and X.dtype == np.float32 and len(y) == 3000
    assert len(np.unique(y)) == 40
    assert not list(tmp_path.glob(".*.tmp"))


def test_scale_benchmark_reports_devices_and_cluster_scaling(tmp_path, capsys):
    pytest.importorskip("dask.distributed")
    code = main(["bench", "--shape", "imagenet", "--scale", "0.003", "--dim", "16", "--classes", "20",
                 "--measure-partitions", "4", "--devices", "cpu", "--cluster-workers", "1,2",
                 "--workdir", str(tmp_path), "--json"])
    assert code == 0
    res = json.loads(capsys.readouterr().out)
    assert res["n"] == round(1_281_167 * 0.003) and res["parameters"]["n_partitions"] == 64
    cpu = res["phase"]["cpu"]
    assert cpu["phase_seconds_scaled_to_m"] == pytest.approx(cpu["phase_seconds_measured"] * 16)
    assert cpu["peak_anon_gib"] > 0
    assert 0.0 < cpu["heldout_accuracy"] <= 1.0
    for w in ("1", "2"):
        assert res["cluster"][w]["identical_to_one_process"] is True
