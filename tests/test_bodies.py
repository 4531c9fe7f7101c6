"""results.json's typed bodies (:mod:`aflite.rundir.schema`): a key of the wrong type at any depth is refused in one
line naming it, by the parser and by every reader of a folder, even when the file was re-sealed after the edit."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from aflite.cli import main
from aflite.errors import InputError
from aflite.rundir.manifest import seal
from aflite.rundir.schema import RunBody, RunParameters, parse


def resealed(run_dir: Path, edit: dict[str, object]) -> None:
    """results.json with ``edit`` merged into its nested objects, sealed again as aflite seals it."""
    res = json.loads((run_dir / "results.json").read_text())
    for key, value in edit.items():
        res[key] = {**res[key], **value} if isinstance(value, dict) else value
    res.pop("sealed", None)
    (run_dir / "results.json").write_text(json.dumps(seal(res)))


def test_the_parsed_body_types_its_nested_objects(committed):
    doc = parse(json.loads((committed["run"] / "results.json").read_text()), committed["run"] / "results.json")
    assert isinstance(doc.body, RunBody) and isinstance(doc.body.parameters, RunParameters)
    assert doc.body.parameters.n_partitions == 4 and isinstance(doc.body.parameters.threshold, float)


def test_a_run_is_read_back_typed_with_no_raw_results_dict(committed):
    """A reader of a run folder gets its envelope and body as dataclasses (issue 48: the run record typed); the
    keys the card and evaluate read (the input's sha256, the seed, Φ) are typed fields with results.json's values."""
    import dataclasses

    from aflite.rundir.read import RunRecord, read_run
    from aflite.rundir.schema import Envelope, FeaturizerRecord

    assert [f.name for f in dataclasses.fields(RunRecord)] == ["path", "envelope", "body"]
    raw = json.loads((committed["run"] / "results.json").read_text())
    rec = read_run(committed["run"])
    assert isinstance(rec.envelope, Envelope) and isinstance(rec.body.featurizer, FeaturizerRecord)
    assert (rec.seed, rec.envelope.versions, rec.envelope.manifest) == (raw["seed"], raw["versions"], raw["manifest"])
    assert (rec.body.dataset_sha256, rec.body.dataset_sha256_of, rec.body.dropped_at_load) == (
        raw["dataset_sha256"], None, raw["dropped_at_load"])
    assert rec.body.featurizer.name == raw["featurizer"]["name"] == "ngram"
    assert dataclasses.asdict(rec.body.parameters) == raw["parameters"]  # what the card copies, written back


@pytest.mark.parametrize("skipped", [False, True])
def test_the_typed_probe_is_written_back_as_the_run_wrote_it(skipped):
    """The card copies the run's probe from its typed body: the same keys (a skipped probe has no model or groups,
    a probed one no top-level skipped), in the same order, with the same values."""
    from aflite.commands.run import _probe_row
    from aflite.commands.summary_md import PROBE_MEANING
    from aflite.evaluate.probe import ProbeResult
    from aflite.rundir.schema import ProbeRecord
    from aflite.rundir.typed_json import typed

    rows = [_probe_row(ProbeResult("D", 40, 0.625, 0.05, 0.4)),
            _probe_row(ProbeResult("D(Φ)", 30, float("nan"), float("nan"), 0.5, skipped="one label"))]
    probe = ({"skipped": "too few rows", "results": [], "meaning": PROBE_MEANING} if skipped else
             {"model": "TF-IDF on the hypothesis only", "groups": "none",
              "results": [dataclasses.asdict(r) for r in rows], "meaning": PROBE_MEANING})
    back = typed(ProbeRecord, probe, "partial_input_probe").to_json()
    assert json.dumps(back) == json.dumps(probe)


@pytest.mark.parametrize(("edit", "expect"), [
    ({"seed": "0"}, "'seed' is \"0\", not an integer;"),
    ({"dataset_sha256": 1}, "'dataset_sha256' is 1, not a string;"),
])
def test_a_run_whose_seed_or_input_sha256_has_the_wrong_type_is_refused(tmp_path, committed, edit, expect):
    from aflite.rundir.read import read_run

    run_dir = tmp_path / "run"
    shutil.copytree(committed["run"], run_dir)
    resealed(run_dir, edit)
    with pytest.raises(InputError, match=expect):
        read_run(run_dir)


@pytest.mark.parametrize(("edit", "expect"), [
    ({"parameters": {"n_partitions": "4"}}, "'parameters'['n_partitions'] is \"4\", not an integer"),
    ({"parameters": {"threshold": "0.75"}}, "'parameters'['threshold'] is \"0.75\", not a number"),
    ({"parameters": {"train_size": [1]}}, "'parameters'['train_size'] is [1], not an integer"),
])
def test_a_resealed_nested_key_of_the_wrong_type_is_refused_in_one_line_by_every_reader(
        tmp_path, committed, capsys, edit, expect):
    run_dir = tmp_path / "run"
    shutil.copytree(committed["run"], run_dir)
    resealed(run_dir, edit)
    for argv in (["report", run_dir], ["card", run_dir, "--out", tmp_path / "card"],
                 ["explain", committed["data"], run_dir, "--out", tmp_path / "ex", "--quiet"],
                 ["evaluate", committed["data"], run_dir, "--out", tmp_path / "ev", "--quiet"]):
        code = main([str(a) for a in argv])
        err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
        assert code == 2 and len(err) == 1 and expect in err[0], (argv[0], err)
    assert not any((tmp_path / name).exists() for name in ("card", "ex", "ev"))


def test_the_parser_names_the_innermost_wrong_key_of_a_list_and_a_dict():
    doc = {"command": "explain", "format_version": 1, "argv": [], "versions": {}, "manifest": {}, "run": {},
           "first_phase": {}, "checks": {"toy": {"summary": {}, "options": {}, "columns": ["a", 3], "files": []}}}
    with pytest.raises(InputError, match=r"'checks'\['toy'\]\['columns'\]\[1\] is 3, not a string"):
        parse(doc, Path("results.json"))


def test_a_run_s_timings_and_scaling_are_typed_fields_with_the_written_values(committed):
    """The keys the run's writer adds after the filter (seconds, wall time, resume, scaled defaults, timings) are
    RunBody fields: read back with results.json's values, and a wrong type among them is refused like any other."""
    path = committed["run"] / "results.json"
    raw = json.loads(path.read_text())
    body = parse(raw, path).body
    assert isinstance(body, RunBody)
    keys = ("seconds_total", "wall_seconds_this_call", "filter_wall_seconds_this_call", "resumed_from_iteration",
            "timings", "scaled_defaults")
    assert all(k in raw for k in keys)
    assert [getattr(body, k) for k in keys] == [raw[k] for k in keys]
    assert body.wall_seconds_this_call is not None and body.filter_wall_seconds_this_call is not None
    assert body.wall_seconds_this_call >= body.filter_wall_seconds_this_call > 0
    with pytest.raises(InputError, match=r"'timings'\['filter_seconds'\] is \"1\", not a number"):
        parse({**raw, "timings": {**raw["timings"], "filter_seconds": "1"}}, path)
