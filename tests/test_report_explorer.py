"""The explorer page without a browser: which folder is which, what the page embeds (escaped, decodable), the
competency plot's Bonferroni curve, the evaluate and audit pages, and ``aflite report``'s refusals."""

from __future__ import annotations

import csv
import json
import math
import shutil
from pathlib import Path

import pytest
from committed import commit
from report_pages import IMG, SCRIPT, TITLE_SCRIPT, make_explain, make_run, write_dataset

from aflite.cli import main
from aflite.commands.report import rebuilt_page, write_page
from aflite.errors import InputError
from aflite.report.explorer import embedded_data, render
from aflite.report.frame import json_for_script, packed
from aflite.report.rows import token_plot
from aflite.rundir.manifest import seal

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("pages")
    run = make_run(tmp)
    return {"run": run, "explain": make_explain(tmp, run)}


def test_json_for_script_escapes_markup_and_round_trips() -> None:
    value = {"t": [IMG, SCRIPT, "a & b", "line\u2028sep\u2029"]}
    text = json_for_script(value)
    assert not any(c in text for c in "<>&\u2028\u2029")
    assert json.loads(text) == value
    import base64
    import gzip

    assert json.loads(gzip.decompress(base64.b64decode(packed(value)))) == value
    # a phase with no scored row records NaN quantiles: null in the page, never invalid JSON
    assert json.loads(json_for_script({"q": [float("nan"), 1.5, float("inf")]})) == {"q": [None, 1.5, None]}


def test_the_run_page_embeds_every_row_escaped(pages: dict[str, Path]) -> None:
    html = (pages["run"] / "report.html").read_text(encoding="utf-8")
    assert IMG not in html and TITLE_SCRIPT not in html and "document.title='pwned'" in json.dumps(
        embedded_data(html))
    data = embedded_data(html)
    cols = data["cols"]
    assert len(cols["id"]) == 300 and len(cols["ta"]) == 300
    row8 = cols["id"].index("p8")
    assert cols["ta"][row8].startswith(SCRIPT)  # the exact text, restored by JSON.parse
    assert len(data["plots"]["history"]) >= 1
    assert "A test verdict &lt;b&gt;not bold&lt;/b&gt;." in html


def test_report_builds_each_folder_s_page_by_the_command_its_results_name(pages: dict[str, Path],
                                                                        tmp_path: Path) -> None:
    """aflite report's page of a folder: the Result class of the command its results.json names (no guessing from
    the files); an old, foreign or non-folder path refused in one line."""
    assert rebuilt_page(pages["run"]).title.startswith("aflite run")
    assert rebuilt_page(pages["explain"]).title.startswith("aflite explain")
    ev = tmp_path / "ev"
    ev.mkdir()
    commit(ev, measured_evaluate(), command="evaluate")
    assert rebuilt_page(ev).title.startswith("aflite evaluate")
    old = tmp_path / "old"
    old.mkdir()
    shutil.copy(REPO / "docs/measured/evaluate_snli_devtest_results.json", old / "results.json")
    with pytest.raises(InputError, match=r"made by aflite < 0\.3 \(no format_version\): run it again"):
        rebuilt_page(old)
    with pytest.raises(InputError, match="not an aflite output folder"):
        rebuilt_page(tmp_path / "ev" / "..")
    with pytest.raises(InputError, match="not a folder"):
        rebuilt_page(ev / "results.json")


def test_the_explain_page_has_the_data_map_columns_and_the_tokens(pages: dict[str, Path]) -> None:
    data = embedded_data((pages["explain"] / "report.html").read_text(encoding="utf-8"))
    cols = data["cols"]
    for key in ("conf", "var", "region", "issue", "top", "ta", "tb"):
        assert len(cols[key]) == len(cols["id"]), key
    assert set(cols["regions"]) == {"easy", "ambiguous", "hard"}
    assert cols["w"] == [round(k % 7 / 7, 4) for k in range(len(cols["id"]))]  # weights.csv, matched by id
    assert cols["w_name"] == "weight"
    assert set(data["plots"]["tokens"]["sets"]) == {"full", "kept", "random"}
    assert data["plots"]["history"], "the run's phases, found through explain's argv"


def test_bonferroni_curve_from_tokens_csv(pages: dict[str, Path]) -> None:
    with (pages["explain"] / "tokens.csv").open(encoding="utf-8", newline="") as fh:
        tok = token_plot(csv.DictReader(fh), 0.01, "tokens.csv")
    full = tok["sets"]["full"]
    from scipy.stats import norm

    assert full["n_tests"] == 21
    assert full["z_crit"] == pytest.approx(norm.isf(0.01 / 21))
    for curve in full["curves"].values():
        assert curve["p0"] == pytest.approx(1 / 3, abs=1e-3)  # the base rate the fixture's z used
        n, p = curve["n"][-1], curve["p"][-1]
        assert p == pytest.approx(1 / 3 + full["z_crit"] * math.sqrt((1 / 3) * (2 / 3) / n), abs=1e-3)
    assert full["n_significant"] == sum(t["sig"] for t in full["tokens"])


def test_the_competency_curve_is_drawn_at_the_alpha_the_token_check_ran_with(pages: dict[str, Path]) -> None:
    """The token check marks tokens at its own α (``--alpha``, in its options); the page's Bonferroni curve is
    drawn at that α, read from the typed body, not at 0.01 whatever the check ran with."""
    from scipy.stats import norm

    from aflite.explain.files import ExplainResult
    from aflite.rundir.schema import parse

    folder = pages["explain"]
    res = json.loads((folder / "results.json").read_text(encoding="utf-8"))
    res["checks"]["tokens"]["options"]["alpha"] = 0.05
    tokens = ExplainResult.page_of(folder, parse(res, folder / "results.json")).data["plots"]["tokens"]
    assert tokens["alpha"] == 0.05
    assert tokens["sets"]["full"]["z_crit"] == pytest.approx(norm.isf(0.05 / 21))


def measured_evaluate() -> dict[str, object]:
    """The body of a measured ``aflite evaluate`` (docs/measured), without the envelope it was written with."""
    body = json.loads((REPO / "docs/measured/evaluate_snli_devtest_results.json").read_text(encoding="utf-8"))
    return {k: v for k, v in body.items() if k not in ("command", "argv", "versions", "seed")}


def test_the_evaluate_page_has_bars_and_chance(tmp_path: Path) -> None:
    commit(tmp_path, measured_evaluate(), command="evaluate")
    data = embedded_data(write_page(tmp_path).read_text(encoding="utf-8"))
    acc = data["plots"]["accuracy"]
    res = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))
    assert len(acc["bars"]) == sum(1 for m in res["aggregate"].values() for e in m.values()
                                   if (e.get("own_heldout") or {}).get("mean") is not None)
    counts = res["training_sets"][0]["label_counts"]
    assert acc["chance"] == pytest.approx(max(counts.values()) / sum(counts.values()))


def test_the_evaluate_page_has_each_training_loss_and_the_learning_rate_check(tmp_path: Path) -> None:
    """The loss curves (``runs``) and the learning-rate check (``config``) reach the page from the typed body."""
    body = measured_evaluate()
    runs, config = body["runs"], body["config"]
    assert isinstance(runs, list) and isinstance(config, dict)
    runs[0]["loss_curve"] = {"step": [1, 2], "loss": [1.1, 0.9]}
    config["finetune"] = {**(config.get("finetune") or {}), "lr_check": {
        "chosen": 1e-4, "train_rows": 10, "heldout_rows": 5,
        "candidates": [{"lr": 1e-4, "accuracy": 0.5, "loss_curve": {"step": [1], "loss": [1.0]}}]}}
    commit(tmp_path, body, command="evaluate")
    acc = embedded_data(write_page(tmp_path).read_text(encoding="utf-8"))["plots"]["accuracy"]
    assert [(c["set"], c["loss"]) for c in acc["losses"]] == [(runs[0]["train_set"], [1.1, 0.9])]
    assert acc["lr_check"]["chosen"] == 1e-4 and acc["lr_check"]["candidates"][0]["loss"] == [1.0]


def test_an_audit_page_is_put_on_a_fresh_frame_with_the_verdict(tmp_path: Path) -> None:
    from aflite.report.audit import _page_head, _page_tail

    body = "<h2>Hypothesis-only condition</h2><p>content kept</p>"
    (tmp_path / "report.html").write_text("\n".join([*_page_head("Audit <x>", "intro", ["note <1>"]), body,
                                                     *_page_tail(False)]), encoding="utf-8")
    commit(tmp_path, {"verdict": ["Leak <found>."]}, command="audit")
    html = write_page(tmp_path).read_text(encoding="utf-8")
    assert body in html and "Leak &lt;found&gt;." in html and "<title>Audit &lt;x&gt;</title>" in html
    assert html.count("<!DOCTYPE html>") == 1 and "note &lt;1&gt;" in html and ">intro<" in html
    again = write_page(tmp_path).read_text(encoding="utf-8")
    assert again == html  # rebuilding is stable


def test_texts_are_left_out_with_a_note_when_the_dataset_is_gone(pages: dict[str, Path], tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(pages["run"], run)
    res = json.loads((run / "results.json").read_text(encoding="utf-8"))
    res["dataset"] = str(tmp_path / "missing.tsv")
    res["dataset_relative"] = "../missing.tsv"
    (run / "results.json").write_text(json.dumps(seal(res)), encoding="utf-8")  # as if aflite had written it
    page = rebuilt_page(run)
    assert not isinstance(page, str)
    html = render(page)
    assert "Texts not shown" in html and "ta" not in embedded_data(html)["cols"]


def test_the_page_reloads_the_dataset_with_the_recorded_column_options(tmp_path: Path) -> None:
    """The texts of a run made with --id-column/--label are read back under those columns (their keywords in
    load_dataset), so the page's rows line up with the run's ids."""
    from aflite.report.rows import dataset_at, load_rows_dataset

    data = tmp_path / "d.tsv"
    data.write_text("uid\tq\ty\nu1\thello\ta\nu2\tworld\tb\n", encoding="utf-8")
    recorded = {"text_a": "q", "label": "y", "id_column": "uid"}  # what run records of --text-a/--label/--id-column
    path, opts = dataset_at(str(data), recorded, None)
    assert path == str(data) and opts == {"text_a": "q", "label": "y", "id_column": "uid"}
    notes: list[str] = []
    ds = load_rows_dataset(None, path, opts, notes)
    assert notes == [] and ds.ids.tolist() == ["u1", "u2"] and ds.labels.tolist() == ["a", "b"]


def test_cli_report_rebuilds_and_refuses_a_folder_that_is_not_a_run(pages: dict[str, Path], tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    page = pages["run"] / "report.html"
    page.unlink()
    assert main(["report", str(pages["run"])]) == 0
    assert page.is_file()
    (tmp_path / "notes.txt").write_text("hello", encoding="utf-8")
    capsys.readouterr()
    assert main(["report", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "not an aflite output folder" in err
    assert main(["report", str(tmp_path / "nope")]) == 2
    assert not (tmp_path / "report.html").exists()


def test_aflite_run_writes_the_page(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "pairs.tsv", n=240)
    out = tmp_path / "out"
    assert main(["run", str(data), "--out", str(out), "--featurizer", "ngram", "--no-probe", "--quiet",
                 "--n-partitions", "8", "--train-size", "100", "--slice-size", "20", "--target-size", "150",
                 "--threshold", "0.6"]) == 0
    data_embedded = embedded_data((out / "report.html").read_text(encoding="utf-8"))
    assert len(data_embedded["cols"]["id"]) == 240 and "tb" in data_embedded["cols"]


def test_thumbnails_for_a_bounded_sample_of_image_rows(tmp_path: Path) -> None:
    pil = pytest.importorskip("PIL.Image")
    from aflite.report.thumbs import THUMB_PX, add_thumbnails, sample_rows

    refs = []
    for i in range(5):
        path = tmp_path / f"im{i}.png"
        pil.new("RGB", (200, 120), (40 * i, 0, 0)).save(path)
        refs.append(str(path))
    (tmp_path / "bad.png").write_bytes(b"not an image")
    refs.append(str(tmp_path / "bad.png"))
    cols = {"id": [str(i) for i in range(6)], "phase": [-1, 0, -1, 1, -1, 0], "p": [1, 900, 2, 800, 3, 700]}
    assert sample_rows(cols, limit=2) == [0, 1, 3]  # the first two, and the two most predictable removed
    made = add_thumbnails(cols, [*refs[:5], refs[5]])
    assert made == 5 and "5" not in cols["thumb"]  # the unreadable file has none
    import base64
    import io

    uri = cols["thumb"]["0"]
    assert uri.startswith("data:image/jpeg;base64,")
    with pil.open(io.BytesIO(base64.b64decode(uri.split(",", 1)[1]))) as im:
        assert max(im.size) == THUMB_PX and im.size == (48, 29)


def test_an_image_run_page_has_thumbnails(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from test_images import FILTER, _run, square_images, tiny_vit

    square_images(tmp_path / "d", n_per_class=8)
    out = tmp_path / "out"
    assert _run(["run", str(tmp_path / "d"), "--out", str(out), "--featurizer", "hf-image", "--model-path",
                 str(tiny_vit(tmp_path / "vit")), *FILTER]) == 0
    cols = embedded_data((out / "report.html").read_text(encoding="utf-8"))["cols"]
    assert len(cols["id"]) == 16 and len(cols["thumb"]) == 16
    assert sorted(cols["ta"]) == sorted(str(tmp_path / "d" / i) for i in cols["id"])  # each row's own file
    assert all(uri.startswith("data:image/jpeg;base64,") for uri in cols["thumb"].values())


# ------------------------------------------------------------------ report trusts nothing it reads (issue 34, 6)
def _run_from(cwd: Path, data_name: str, out_name: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``aflite run DATA --out OUT`` typed with paths relative to ``cwd``, as a user in that folder would."""
    write_dataset(cwd / data_name, n=240)
    monkeypatch.chdir(cwd)
    assert main(["run", data_name, "--out", out_name, "--featurizer", "ngram", "--no-probe", "--quiet",
                 "--n-partitions", "8", "--threshold", "0.6"]) == 0
    return cwd / out_name


def _texts(page: Path) -> bool:
    return "ta" in embedded_data(page.read_text(encoding="utf-8"))["cols"]


def test_report_finds_the_data_from_any_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    work = tmp_path / "work"
    work.mkdir()
    run = _run_from(work, "pairs.tsv", "run", monkeypatch)
    summary = json.loads((run / "results.json").read_text(encoding="utf-8"))
    assert summary["dataset"] == str(work / "pairs.tsv") and summary["dataset_relative"] == "../pairs.tsv"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert main(["report", str(run)]) == 0 and _texts(run / "report.html")
    # the run folder and its data moved together: found relative to the run folder
    moved = tmp_path / "moved"
    shutil.move(str(work), str(moved))
    assert main(["report", str(moved / "run")]) == 0 and _texts(moved / "run" / "report.html")


def test_report_never_replaces_a_page_with_texts_by_one_without(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    work = tmp_path / "work"
    work.mkdir()
    run = _run_from(work, "pairs.tsv", "run", monkeypatch)
    page = (run / "report.html").read_bytes()
    (work / "pairs.tsv").rename(tmp_path / "gone.tsv")
    capsys.readouterr()
    assert main(["report", str(run)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0] == (
        f"aflite report: error: {run / 'report.html'}: shows the rows' texts and the page rebuilt from here would not "
        f"(the dataset file {work / 'pairs.tsv'} is not found from here); run aflite report where the dataset path "
        f"resolves, or remove report.html to write the page without texts")
    assert (run / "report.html").read_bytes() == page
    # another file under the run's name (same name, other content) is not the run's: no texts from it either
    write_dataset(work / "pairs.tsv", n=300)
    assert main(["report", str(run)]) == 2 and (run / "report.html").read_bytes() == page
    assert "is not the file the run read" in capsys.readouterr().err
    (run / "report.html").unlink()  # asked for: the page without texts, saying why
    assert main(["report", str(run)]) == 0 and not _texts(run / "report.html")


@pytest.mark.parametrize("case", ["list", "another_command", "evaluate_in_a_run", "old_evaluate_in_a_run", "banana",
                                  "page_is_a_folder", "kept_yes", "p_text"])
def test_report_refuses_what_it_cannot_trust_in_one_line(pages: dict[str, Path], tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str], case: str) -> None:
    run = tmp_path / "run"
    shutil.copytree(pages["run"], run)
    res = json.loads((run / "results.json").read_text(encoding="utf-8"))
    if case == "list":
        (run / "results.json").write_text("[]", encoding="utf-8")
        expect = f"{run / 'results.json'}: not aflite's results.json (a JSON list, not an object)"
    elif case == "another_command":
        (run / "results.json").write_text(json.dumps(seal({**res, "command": "embed"})), encoding="utf-8")
        expect = f"{run / 'results.json'}: 'featurizer' is {{"
    elif case == "evaluate_in_a_run":
        evaluate = json.loads((REPO / "docs/measured/evaluate_snli_devtest_results.json").read_text())
        (run / "results.json").write_text(json.dumps({**res, "command": "evaluate", **evaluate}), encoding="utf-8")
        expect = f"{run / 'results.json'}: edited after aflite wrote it"
    elif case == "old_evaluate_in_a_run":  # written before results.json named its command
        shutil.copy(REPO / "docs/measured/evaluate_snli_devtest_results.json", run / "results.json")
        expect = f"{run / 'results.json'}: made by aflite < 0.3 (no format_version): run it again"
    elif case in ("banana", "kept_yes", "p_text"):
        lines = (run / "instances.csv").read_text(encoding="utf-8").splitlines()
        cells = lines[3].split(",")
        column = {"banana": "removed_at", "kept_yes": "kept", "p_text": "predictability"}[case]
        cells[["id", "label", "kept", "predictability", "removed_at"].index(column)] = {
            "banana": "banana", "kept_yes": "yes", "p_text": "high"}[case]
        lines[3] = ",".join(cells)
        (run / "instances.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
        expect = f"{run / 'instances.csv'}: "  # an edit: refused by the manifest before the file is parsed
    else:
        (run / "report.html").unlink()
        (run / "report.html").mkdir()
        expect = f"{run / 'report.html'}: is a folder, not the page; move it away and run again"
    before = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    capsys.readouterr()
    assert main(["report", str(run)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"aflite report: error: {expect}"), err
    if case in ("banana", "kept_yes", "p_text"):
        assert err[0].endswith("the folder was changed after aflite wrote it; restore the file or run the command "
                               "again")
    assert {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()} == before
