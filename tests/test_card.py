"""``aflite card``: the dataset card of a run. Its YAML is parsed (PyYAML) and its figures are read back from the
Markdown tables and compared with the run's, evaluate's and explain's results.json — never by rendering the card
again; the same inputs give the same bytes; bad inputs stop with one line and exit 2, before anything is written."""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from aflite.atomic import json_text
from aflite.card import write_card
from aflite.card.facts import portable_path, size_category
from aflite.cli import main
from aflite.data import demo_dataset_path
from aflite.errors import OutputError, ParameterError
from aflite.rundir.manifest import seal

RUN = ["--featurizer", "ngram", "--quiet", "-m", "8"]
ROOT_DOCS = Path(__file__).resolve().parents[1] / "docs"


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def results(folder: Path) -> dict[str, Any]:
    return json.loads((folder / "results.json").read_text(encoding="utf-8"))


def resealed(folder: Path, r: dict[str, Any]) -> None:
    """results.json changed and sealed again, as aflite would have written it: the card's own checks of what the
    folders say are tested, not the seal (tests/test_folder_commit.py refuses an unsealed edit)."""
    (folder / "results.json").write_text(json_text(seal(r)), encoding="utf-8")


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run of the bundled sample (n-gram Φ), an evaluate (n-gram LR on the hypothesis, 2 seeds) and an explain
    folder made from it, and a second run (another seed) with its own evaluate."""
    tmp = tmp_path_factory.mktemp("card")
    data = str(demo_dataset_path())
    assert main(["run", data, "--out", str(tmp / "run"), *RUN]) == 0
    assert main(["evaluate", data, str(tmp / "run"), "--out", str(tmp / "ev"), "--models", "ngram:hypothesis",
                 "--seeds", "2", "--quiet"]) == 0
    assert main(["explain", data, str(tmp / "run"), "--out", str(tmp / "ex"), "--quiet", "--random-seeds", "2",
                 "--neighbours", "0"]) == 0
    assert main(["run", data, "--out", str(tmp / "run2"), *RUN, "--seed", "1", "--no-probe"]) == 0
    assert main(["evaluate", data, str(tmp / "run2"), "--out", str(tmp / "ev2"), "--models", "ngram:hypothesis",
                 "--seeds", "1", "--no-random-baseline", "--no-single-iteration", "--quiet"]) == 0
    return tmp


@pytest.fixture(scope="module")
def card(made: Path) -> Path:
    out = made / "card"
    assert main(["card", str(made / "run"), "--out", str(out), "--evaluate", str(made / "ev"), "--explain",
                 str(made / "ex")]) == 0
    return out


# ---------------------------------------------------------------------------------------------- reading a card back
def split_card(text: str) -> tuple[dict[str, Any], str]:
    yaml = pytest.importorskip("yaml")  # installed with the [text]/[hf]/[cluster] extras (transformers, datasets)
    assert text.startswith("---\n")
    end = text.index("\n---\n", 4)
    return yaml.safe_load(text[4:end + 1]), text[end + 5:]


def table(body: str, heading: str) -> list[dict[str, str]]:
    """The first Markdown table after the line ``heading``, as one dict per row (cells unescaped)."""
    lines = body.splitlines()
    i = lines.index(heading)
    while not lines[i].startswith("|"):
        i += 1
    rows = []
    while i < len(lines) and lines[i].startswith("|"):
        cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", lines[i])[1:-1]]
        rows.append(cells)
        i += 1
    head, body_rows = rows[0], rows[2:]
    return [dict(zip(head, r, strict=True)) for r in body_rows]


def number(cell: str) -> float:
    return float(cell.replace(",", "").strip("`"))


def close(cell: str, value: float, scale: float = 100) -> None:
    """A one-decimal figure on the card equals ``value`` (a fraction, shown as %) up to its rounding."""
    assert abs(number(cell) - scale * value) <= 0.05 + 1e-9, (cell, value)


def mean_std(cell: str, stat: dict[str, Any]) -> None:
    mean, _, std = cell.partition(" ± ")
    close(mean, stat["mean"])
    if stat["n"] > 1:
        close(std, stat["std"])
    else:
        assert not std


# ---------------------------------------------------------------------------------------------- the card's figures
def test_front_matter_parses_and_names_the_release(made: Path, card: Path) -> None:
    res = results(made / "run")
    meta, _ = split_card((card / "README.md").read_text(encoding="utf-8"))
    assert meta["license"] == "cc-by-sa-4.0"  # the bundled sample's own (resources/SNLI_SAMPLE_LICENSE.md)
    assert meta["task_categories"] == ["text-classification"] and meta["task_ids"] == ["natural-language-inference"]
    assert res["size_after"] in range(1_000, 10_000) and meta["size_categories"] == ["1K<n<10K"]
    assert meta["source_datasets"] == ["extended|stanfordnlp/snli"] and isinstance(meta["pretty_name"], str)
    files = meta["configs"][0]["data_files"]
    assert meta["configs"][0]["config_name"] == "default"
    assert files == [{"split": "train", "path": "data/train-00000-of-00001.parquet"}]
    assert (card / files[0]["path"]).is_file()
    assert meta["dataset_info"] == {"features": [{"name": c, "dtype": "string"} for c in
                                                 ("id", "premise", "hypothesis", "label")]}


def check_run_figures(card: Path, run: Path) -> None:
    """Every figure of the run on the card (sizes, phases, parameters, seed, label shift, probe, verdict, Φ's
    options) equals the run's results.json, up to the card's rounding."""
    res = results(run)
    _, body = split_card((card / "README.md").read_text(encoding="utf-8"))
    m = re.search(r"\|D\| = ([\d,]+) → \|D\(Φ\)\| = ([\d,]+) rows in (\d+) phase\(s\): ([\d,→ ]+)\.", body)
    assert m is not None
    assert (number(m[1]), number(m[2]), int(m[3])) == (res["size_before"], res["size_after"], res["n_iterations"])
    assert [number(s) for s in m[4].split(" → ")] == res["sizes"]
    assert f"**Stop reason:** {res['stop_reason']}." in body
    rows = {r["parameter"]: r["value"].strip("`") for r in table(body, "### Filter")}
    params = {k.split("`")[1]: v for k, v in rows.items() if "`" in k}
    assert set(params) == {"target_size", "n_partitions", "train_size", "slice_size", "threshold", "strategy", "model",
                           "C"}
    for key, cell in params.items():
        value = res["parameters"][key]
        assert (cell == value) if isinstance(value, str) else (json.loads(cell) == value), key
    assert int(rows["seed"]) == res["seed"] and rows["groups"] == res["groups"]
    shift = res["label_shift"]
    for row in table(body, "### Label shift"):
        lab = row["label"].strip("`")
        assert number(row["D rows"]) == res["label_counts_before"][lab]
        assert number(row["D(Φ) rows"]) == res["label_counts_after"][lab]
        close(row["D share %"], shift["shares_before"][lab], 1)
        close(row["D(Φ) share %"], shift["shares_after"][lab], 1)
        close(row["change (points)"], shift["change_points"][lab], 1)
    probe = {r["name"]: r for r in (res.get("partial_input_probe") or {}).get("results") or []}
    rows = table(body, "### The run's probe") if probe else []
    assert [r["set"] for r in rows] == list(probe)
    for row in rows:
        p = probe[row["set"]]
        assert number(row["rows"]) == p["size"]
        close(row["accuracy %"], p["accuracy"])
        close(row["± (std)"], p["accuracy_std"])
        close(row["majority %"], p["majority"])
        close(row["lead over majority (points)"], p["delta_majority"])
    for sentence in res["verdict"]:
        assert f"> {sentence}" in body
    for key, value in res["featurizer"]["options"].items():
        if not (isinstance(value, str) and value.startswith("/")):
            assert f"| `{key}` | `{json.dumps(value) if not isinstance(value, str) else value}` |" in body


def test_every_figure_equals_the_runs_results(made: Path, card: Path) -> None:
    check_run_figures(card, made / "run")


def test_hashes_on_the_card_are_those_of_the_files(made: Path, card: Path) -> None:
    res = results(made / "run")
    text = (card / "README.md").read_text(encoding="utf-8")
    manifest = json.loads((card / "manifest.json").read_text(encoding="utf-8"))
    run = made / "run"
    assert res["dataset_sha256"] == sha(demo_dataset_path())  # recorded by aflite run itself
    for name, digest in (("filtered.tsv.gz", sha(run / "filtered.tsv.gz")), ("kept_ids.txt", sha(run / "kept_ids.txt")),
                         ("snli_sample.tsv.gz", res["dataset_sha256"])):
        assert re.search(rf"`{re.escape(name)}`[^\n]*sha256 `{digest}`", text), name
    assert manifest["output"]["sha256"] == sha(run / "filtered.tsv.gz")
    assert manifest["output"]["kept_ids"] == {"file": "kept_ids.txt", "sha256": sha(run / "kept_ids.txt"),
                                              "ids": res["size_after"]}
    assert manifest["input"]["sha256"] == res["dataset_sha256"]
    assert manifest["input"]["sha256_source"] == "recorded by aflite run"


def test_manifest_copies_the_results(made: Path, card: Path) -> None:
    res, ev, ex = results(made / "run"), results(made / "ev"), results(made / "ex")
    m = json.loads((card / "manifest.json").read_text(encoding="utf-8"))
    assert m["labels"] == {"before": res["label_counts_before"], "after": res["label_counts_after"],
                           "shift": res["label_shift"]}
    assert m["probe"] == res["partial_input_probe"] and m["verdict"] == res["verdict"]
    assert m["filter"]["parameters"] == res["parameters"] and m["filter"]["sizes"] == res["sizes"]
    assert m["versions"] == res["versions"] and m["filter"]["seed"] == res["seed"]
    agg = ev["aggregate"]["ngram:hypothesis"]
    for role, name in m["evaluate"]["sets"].items():
        got = m["evaluate"]["scores"]["ngram:hypothesis"][role]
        assert got["own_heldout"] == agg[name]["own_heldout"]
        assert got["original_heldout"] == agg[name]["original_heldout"]
    assert m["evaluate"]["tied_to_run_by"] == "the sha256 of kept_ids.txt"
    assert m["explain"]["significant_tokens"] == ex["checks"]["tokens"]["summary"]["significant_tokens"]
    assert m["explain"]["datamap"]["removed_by_region"] == ex["checks"]["datamap"]["summary"]["removed_by_region"]
    assert "/" not in json.dumps(m["input"]["file"]) and not re.search(r'"/(?:tmp|work|home)/', json.dumps(m))


def test_the_manifest_reads_back_as_the_runs_own_records(made: Path, card: Path) -> None:
    """The sections that are another command's record (the run's label shift and probe, explain's significant
    pairs) are read back from manifest.json as that record's own class, equal to the one the folder holds."""
    from aflite.card.schema import label_shift, probe_record, significant_counts
    from aflite.check.token_summary import TokenSummary
    from aflite.rundir.read import read_run

    m = json.loads((card / "manifest.json").read_text(encoding="utf-8"))
    run = read_run(made / "run").body
    assert run.label_shift is not None and run.partial_input_probe is not None and run.partial_input_probe.results
    assert label_shift(m) == run.label_shift and probe_record(m) == run.partial_input_probe
    tokens = TokenSummary.from_json(results(made / "ex")["checks"]["tokens"]["summary"])
    assert tokens.significant_tokens is not None and significant_counts(m["explain"]) == tokens.significant_tokens


def check_evaluate_figures(card: Path, ev_dir: Path) -> int:
    """Every accuracy of the evaluate tables (each model, training set and evaluation, with the chance row) equals
    evaluate's results.json (mean ± std over seeds, up to rounding); returns the number of cells checked."""
    ev = results(ev_dir)
    _, body = split_card((card / "README.md").read_text(encoding="utf-8"))
    cfg = ev["config"]
    evaluations = ([("### On D's held-out part: each training set's own rows", "own_heldout", ""),
                    ("### On the whole held-out part of D (the original distribution)", "original_heldout", "")]
                   if cfg["split"] else [])
    evaluations += [(f"### On test set `{t['name']}`", "tests", t["name"]) for t in cfg["tests"]]
    evaluations += [(f"### On evaluation set `{t['name']}`", "external", t["name"]) for t in cfg["eval_sets"]]
    assert evaluations
    checked = 0
    for heading, kind, name in evaluations:
        rows = {r["model"]: r for r in table(body, heading)}
        assert set(rows) == {"chance (majority class of the same rows)"} | {f"`{k}`" for k in cfg["models"]}
        for row_name, row in rows.items():
            for set_name, cell in row.items():
                if set_name == "model":
                    continue
                model = cfg["models"][0] if row_name.startswith("chance") else row_name.strip("`")
                entry = ev["aggregate"][model][set_name]
                if kind in ("own_heldout", "original_heldout"):
                    stat = entry[f"{kind}_majority" if row_name.startswith("chance") else kind]
                else:
                    stat = entry[kind][name]["majority" if row_name.startswith("chance") else "accuracy"]
                if isinstance(stat, dict):
                    mean_std(cell, stat)
                else:
                    close(cell, stat)
                checked += 1
    return checked


def check_explain_figures(card: Path, ex_dir: Path) -> None:
    checks = results(ex_dir)["checks"]
    ex = {**checks["tokens"]["summary"], "datamap": checks["datamap"]["summary"]}  # each check's keys
    _, body = split_card((card / "README.md").read_text(encoding="utf-8"))
    test = ex["token_test"]
    sig = {r["set"]: number(r["significant pairs"]) for r in table(
        body, f"Significant (token, label) pairs on the {ex['token_view']} (Gardner et al. 2021's test, Bonferroni "
              f"α = {test['alpha']}, tokens in at least {test['min_count']} texts):")}
    assert sig == {"D": ex["significant_tokens"]["full"], "D(Φ)": ex["significant_tokens"]["kept"],
                   f"same-size random subsets (mean of {test['random_subsets']})": ex["significant_tokens"]["random"]}
    top = table(body, "The strongest artifacts left in D(Φ):")
    assert len(top) == min(5, len(ex["top_artifacts"]["kept"]))
    for row, want in zip(top, ex["top_artifacts"]["kept"], strict=False):
        assert row["token"].strip("`") == want["token"] and number(row["texts"]) == want["count"]
        assert abs(number(row["z"]) - want["z"]) <= 0.005 + 1e-9
    regions = {r["region"]: r for r in table(body, next(ln for ln in body.splitlines()
                                                        if ln.startswith("Data map of the first phase")))}
    for region, n in ex["datamap"]["regions"].items():
        assert number(regions[region]["rows"]) == n
        assert number(regions[region]["removed"]) == ex["datamap"]["removed_by_region"][region]


def test_evaluate_and_explain_figures_equal_their_results(made: Path, card: Path) -> None:
    assert check_evaluate_figures(card, made / "ev") == 2 * 2 * 4  # 2 evaluations x (chance + 1 model) x 4 sets
    check_explain_figures(card, made / "ex")


def test_limits_say_why_the_filter_stopped(made: Path, card: Path) -> None:
    res = results(made / "run")
    m = json.loads((card / "manifest.json").read_text(encoding="utf-8"))
    text = (card / "README.md").read_text(encoding="utf-8")
    assert res["stop_reason"].startswith("fewer than k=")  # this run stops by the k-rule
    assert m["limits"][0].startswith("The filter stopped by its k-rule") and f"- {m['limits'][0]}" in text
    assert any("depends on Φ and on the seed" in s for s in m["limits"])
    assert not any("No evaluation was given" in s for s in m["limits"])


def test_same_inputs_same_bytes(made: Path, card: Path, tmp_path: Path) -> None:
    again = write_card(made / "run", tmp_path / "again", evaluate=made / "ev", explain=made / "ex")
    for name in ("README.md", "manifest.json", "croissant.json", "data/train-00000-of-00001.parquet"):
        assert (card / name).read_bytes() == (tmp_path / "again" / name).read_bytes()
    before = (card / "README.md").read_bytes()
    res = write_card(made / "run", card, evaluate=made / "ev", explain=made / "ex")  # into its own folder again
    assert (card / "README.md").read_bytes() == before and res.license == "cc-by-sa-4.0" and not res.notes
    assert sorted(p.name for p in (tmp_path / "again").iterdir()) == [".aflite.lock", "README.md", "croissant.json",
                                                                      "data", "manifest.json"]
    assert again.manifest == json.loads((tmp_path / "again" / "manifest.json").read_text(encoding="utf-8"))


# ---------------------------------------------------------------------------------------------- license
@pytest.fixture(scope="module")
def own_file_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A run of a file aflite knows no license of: the first 700 pairs of the sample, written by hand."""
    tmp = tmp_path_factory.mktemp("own")
    lines = gzip.decompress(demo_dataset_path().read_bytes()).splitlines(keepends=True)
    data = tmp / "mine.tsv"
    data.write_bytes(b"".join(lines[:701]))
    assert main(["run", str(data), "--out", str(tmp / "run"), *RUN, "--no-probe"]) == 0
    return data, tmp / "run"


def test_unknown_license_says_so_and_a_given_one_is_used(own_file_run: tuple[Path, Path], tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    _, run = own_file_run
    assert main(["card", str(run), "--out", str(tmp_path / "a")]) == 0
    assert "note: license unknown" in capsys.readouterr().err
    meta, body = split_card((tmp_path / "a" / "README.md").read_text(encoding="utf-8"))
    assert meta["license"] == "unknown" and meta["source_datasets"] == ["extended"] and "language" not in meta
    assert "- **License:** `unknown` — aflite does not know the input's license" in body
    assert "The license is unknown" in body
    assert "No evaluation was given" in body and "The run's probe was skipped" not in body
    res = write_card(run, tmp_path / "b", license="CC-BY-4.0")
    meta, body = split_card(res.readme.read_text(encoding="utf-8"))
    assert meta["license"] == "cc-by-4.0" and res.manifest["license"]["source"] == "given (--license)"
    with pytest.raises(ParameterError, match="license identifier"):
        write_card(run, tmp_path / "c", license="my license!")
    assert not (tmp_path / "c").exists()


def test_a_license_that_contradicts_the_inputs_is_refused(made: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["card", str(made / "run"), "--out", str(tmp_path / "x"), "--license", "mit"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "licensed cc-by-sa-4.0" in err and not (tmp_path / "x").exists()
    assert main(["card", str(made / "run"), "--out", str(tmp_path / "y"), "--license", "cc-by-sa-4.0"]) == 0


def test_a_hugging_face_folder_brings_its_license(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    lines = gzip.decompress(demo_dataset_path().read_bytes()).decode().splitlines()
    head, body = lines[0].split("\t"), [ln.split("\t") for ln in lines[1:401]]
    ds = datasets.Dataset.from_dict({h: [r[i] for r in body] for i, h in enumerate(head)},
                                    info=datasets.DatasetInfo(license="CC-BY-4.0"))
    ds.save_to_disk(str(tmp_path / "data"))
    assert main(["run", str(tmp_path / "data"), "--out", str(tmp_path / "run"), *RUN, "--no-probe"]) == 0
    res = write_card(tmp_path / "run", tmp_path / "card")
    meta, body_text = split_card(res.readme.read_text(encoding="utf-8"))
    assert meta["license"] == "cc-by-4.0" and res.manifest["license"]["source"] == "the input's dataset_info.json"
    assert meta["configs"][0]["data_files"] == [{"split": "train", "path": "filtered/*.arrow"}]
    assert res.manifest["output"]["is_folder"] and res.manifest["input"]["is_folder"]
    # the saved dataset folder is copied whole into the card, which datasets loads and aflite verify checks
    from test_card_verify import load

    from aflite.card.verify import verify_folder

    copy = tmp_path / "copy"
    shutil.copytree(tmp_path / "card", copy)
    rows = load(copy, tmp_path)
    assert [r["id"] for r in rows] == (tmp_path / "run" / "kept_ids.txt").read_text(encoding="utf-8").split()
    assert verify_folder(copy).ok and verify_folder(copy).checked == 1 + len(list((tmp_path / "run" / "filtered")
                                                                                  .iterdir()))
    arrow = next((copy / "filtered").glob("*.arrow"))
    shutil.copy(arrow, copy / "filtered" / "data-extra.arrow")  # datasets would load it too
    assert verify_folder(copy).problems == [f"{copy / 'filtered' / 'data-extra.arrow'}: not listed in "
                                            f"{copy / 'manifest.json'}: a file the card did not publish, inside its "
                                            f"data folder"]
    with pytest.raises(ParameterError, match="licensed cc-by-4.0"):
        write_card(tmp_path / "run", tmp_path / "card2", license="mit")


# ---------------------------------------------------------------------------------------------- no older folders
# Readers refuse a folder without format_version 1, and every run/demo folder with it records the input's sha256,
# every evaluate the sha256 of each run's kept_ids.txt and every explain its run's: a folder without them is not
# one aflite wrote, and the card has no "older aflite" way round them.
def test_a_run_without_the_inputs_sha256_is_refused(own_file_run: tuple[Path, Path], tmp_path: Path) -> None:
    _, run = own_file_run
    old = tmp_path / "old"
    shutil.copytree(run, old)
    res = results(old)
    del res["dataset_sha256"]
    resealed(old, res)
    with pytest.raises(Exception, match=f"{re.escape(str(old / 'results.json'))}: no 'dataset_sha256'"):
        write_card(old, tmp_path / "c1")
    assert not (tmp_path / "c1").exists()


@pytest.mark.parametrize(("flag", "folder", "key"), [("evaluate", "ev", ("config", "runs_kept_ids_sha256")),
                                                     ("explain", "ex", ("run", "kept_ids_sha256"))])
def test_an_evaluate_or_explain_without_the_kept_ids_sha256_is_refused(made: Path, tmp_path: Path, flag: str,
                                                                         folder: str, key: tuple[str, str]) -> None:
    """Not tied by the run's folder path instead, as cards before format_version were."""
    edited = _edited(made / folder, tmp_path / folder, lambda r: r[key[0]].pop(key[1]))
    with pytest.raises(Exception, match=f"--{flag} {re.escape(str(edited))}: made from (another run|other runs) than"):
        write_card(made / "run", tmp_path / "card", **{flag: edited})
    assert not (tmp_path / "card").exists()


# ---------------------------------------------------------------------------------------------- bad inputs
def _edited(src: Path, dst: Path, edit: Any) -> Path:
    shutil.copytree(src, dst)
    r = results(dst)
    edit(r)
    resealed(dst, r)
    return dst


def test_bad_inputs_stop_with_one_line_and_exit_2(made: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    run = made / "run"
    other_data = _edited(made / "ev", tmp_path / "ev_other", lambda r: r["config"].update(dataset_fingerprint="0" * 32))
    other_explain = _edited(made / "ex", tmp_path / "ex_other", lambda r: r["run"].update(kept_ids_sha256="0" * 64))
    damaged = _edited(made / "ex", tmp_path / "ex_damaged",  # a check's summary is read back typed, by its class
                      lambda r: r["checks"]["datamap"]["summary"].update(regions="many"))
    (tmp_path / "empty").mkdir()
    cases = {
        "not a run folder": ([str(tmp_path / "empty")], "not found"),
        "an evaluate folder as the run": ([str(made / "ev")], "made by aflite evaluate, not aflite run or aflite demo"),
        "a missing run folder": ([str(tmp_path / "nope")], "not a folder"),
        "out is the run folder": ([str(run), "--out", str(run)], "is the run folder"),
        "out inside the run folder": ([str(run), "--out", str(run / "card")], "is inside the run folder"),
        "out another command's folder": ([str(run), "--out", str(made / "run2")], "is the output folder of an aflite"),
        "evaluate of another run": ([str(run), "--evaluate", str(made / "ev2")], "made from other runs"),
        "evaluate of another dataset": ([str(run), "--evaluate", str(other_data)], "made from another dataset"),
        "explain of another run": ([str(run), "--explain", str(other_explain)], "made from another run"),
        "a run as the evaluate folder": ([str(run), "--evaluate", str(made / "run2")], "not aflite evaluate"),
        "a damaged check summary": ([str(run), "--explain", str(damaged)],
                                    "checks['datamap']['summary']: 'regions' is \"many\", not an object"),
    }
    for what, (args, message) in cases.items():
        out = tmp_path / f"out-{len(what)}"
        argv = ["card", *args] + ([] if "--out" in args else ["--out", str(out)])
        assert main(argv) == 2, what
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and err.startswith("aflite card: error:") and message in err, (what, err)
        assert not out.exists() and not (run / "card").exists(), what
    assert sorted(p.name for p in run.iterdir()) == sorted(p.name for p in (made / "run").iterdir())


def test_a_readme_not_written_by_aflite_is_kept(made: Path, tmp_path: Path) -> None:
    out = tmp_path / "repo"
    out.mkdir()
    (out / "README.md").write_text("# my own notes\n", encoding="utf-8")
    with pytest.raises(OutputError, match=r"README.md: not written by aflite card, and aflite card never replaces"):
        write_card(made / "run", out)
    assert (out / "README.md").read_text(encoding="utf-8") == "# my own notes\n"
    assert sorted(p.name for p in out.iterdir()) == ["README.md"]


def test_a_run_that_lost_kept_ids_or_its_filtered_file_is_refused(made: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(made / "run", broken)
    (broken / "filtered.tsv.gz").unlink()
    with pytest.raises(Exception, match=r"filtered.tsv.gz: missing \(listed in"):
        write_card(broken, tmp_path / "c")
    shutil.copy(made / "run" / "filtered.tsv.gz", broken)
    (broken / "kept_ids.txt").write_text("a\n", encoding="utf-8")
    with pytest.raises(Exception, match="kept_ids.txt: 2 bytes, but the manifest"):
        write_card(broken, tmp_path / "c")
    assert not (tmp_path / "c").exists()


# ---------------------------------------------------------------------------------------------- images
def test_an_image_run_gets_an_image_card_with_its_models_identity(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("PIL.Image")
    from test_encoders import square_images, tiny_vit

    from aflite.hashing import file_sha256

    square_images(tmp_path / "d", n_per_class=8)
    model = tiny_vit(tmp_path / "vit")
    assert main(["run", str(tmp_path / "d"), "--out", str(tmp_path / "run"), "--featurizer", "hf-image",
                 "--model-path", str(model), "--train-size", "6", "--slice-size", "2", "--target-size", "10",
                 "--n-partitions", "8", "--threshold", "0", "--quiet", "--device", "cpu"]) == 0
    res = write_card(tmp_path / "run", tmp_path / "card", license="cc0-1.0")
    meta, body = split_card(res.readme.read_text(encoding="utf-8"))
    assert meta["task_categories"] == ["image-classification"] and "task_ids" not in meta
    assert meta["configs"][0]["data_files"] == [{"split": "train", "path": "data/train-00000-of-00001.parquet"}]
    assert meta["size_categories"] == ["n<1K"] and meta["license"] == "cc0-1.0"
    m = res.manifest
    assert m["input"]["sha256"] == file_sha256(tmp_path / "d") == results(tmp_path / "run")["dataset_sha256"]
    assert m["output"]["sha256"] == sha(tmp_path / "run" / "kept.csv")
    ident = m["phi"]["model"]
    assert ident["folder"] == "vit" and ident["found"] and "package" not in ident  # a folder of no package
    assert ident["files_sha256"]["config.json"] == sha(model / "config.json")
    weights = [f for f in model.iterdir() if f.suffix in (".safetensors", ".bin")]
    assert weights and all(ident["files_sha256"][f.name] == sha(f) for f in weights)
    assert m["phi"]["options"]["model_path"] == "vit" and str(tmp_path) not in res.readme.read_text(encoding="utf-8")
    assert any("lists the kept images by path" in s for s in m["limits"])
    check_run_figures(tmp_path / "card", tmp_path / "run")


# ---------------------------------------------------------------------------------------------- helpers
def test_size_categories_follow_the_hubs_buckets() -> None:
    assert [size_category(n) for n in (0, 999, 1_000, 9_999, 10_000, 99_999, 100_000, 999_999, 1_000_000)] == [
        "n<1K", "n<1K", "1K<n<10K", "1K<n<10K", "10K<n<100K", "10K<n<100K", "100K<n<1M", "100K<n<1M", "1M<n<10M"]


def test_portable_paths_leave_the_machine_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    assert portable_path(str(tmp_path / "site" / "pkg" / "model")) == "pkg/model"
    assert portable_path(str(tmp_path / "elsewhere" / "model.npy")) == "model.npy"
    assert portable_path("relative/path.npy") == "relative/path.npy"


def test_the_docs_card_of_the_demo_is_consistent() -> None:
    """docs/card_demo holds the demo's card (made by the command in docs/guide/card.md): it verifies (every file
    the one its manifest lists), its README.md is the rendering of its manifest.json, its YAML parses, and it names
    no path of the machine it was made on."""
    from aflite.card.render import render_card
    from aflite.card.verify import verify_folder

    folder = Path(__file__).resolve().parents[1] / "docs" / "card_demo"
    text = (folder / "README.md").read_text(encoding="utf-8")
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    assert render_card(manifest) == text
    assert verify_folder(folder).problems == []
    meta, _ = split_card(text)
    assert meta["license"] == "cc-by-sa-4.0"
    assert meta["configs"][0]["data_files"][0]["path"] == "data/train-00000-of-00001.parquet"
    for f in (folder / "README.md", folder / "manifest.json"):
        assert not re.search(r"(?<![\w.])/(?:tmp|work|home|root|Users|mnt)/", f.read_text(encoding="utf-8")), f


@pytest.mark.slow
def test_the_docs_card_of_the_demo_keeps_the_rows_the_quick_starts_demo_keeps(tmp_path, minilm_model_path) -> None:
    """docs/card_demo/make.sh runs the demo with the quick start's backend (torch, the `[text]` install): the card's
    kept ids are exactly those a fresh `aflite demo --backend torch` keeps, so a figure copied from the card is the
    one a newcomer sees (issue 59 item 5: the card was once made with ONNX int8 and kept a few more rows)."""
    assert '--backend torch' in (ROOT_DOCS / "card_demo" / "make.sh").read_text(encoding="utf-8")
    manifest = json.loads((ROOT_DOCS / "card_demo" / "manifest.json").read_text(encoding="utf-8"))
    assert "backend" not in manifest["phi"]["options"]  # torch, the one backend Φ's options leave unnamed
    assert main(["demo", "--out", str(tmp_path / "demo"), "--backend", "torch", "--quiet"]) == 0
    kept = tmp_path / "demo" / manifest["output"]["kept_ids"]["file"]
    assert len(kept.read_text(encoding="utf-8").split()) == manifest["output"]["kept_ids"]["ids"]
    assert hashlib.sha256(kept.read_bytes()).hexdigest() == manifest["output"]["kept_ids"]["sha256"]
