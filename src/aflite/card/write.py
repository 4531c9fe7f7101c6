"""``aflite card``: a Hugging Face-style dataset card for the filtered release of a run.

From a run folder (and, optionally, an evaluate and an explain folder made from it), writes a folder ready to
publish: ``OUT/README.md`` — YAML front matter (license, task, size, source, the data file as ``configs``, so that
``datasets.load_dataset(OUT)`` reads it) and a body that says how D(Φ) was made, what filtering changed, what the
evaluation and the explanation measured, and the known limits —, a copy of the run's filtered data file, and
``OUT/manifest.json``, the same facts machine-readable with every file's sha256, written last as the folder's
commit (:mod:`aflite.card.commit`; ``aflite verify`` checks a copy against it). Every figure is copied from the
folders' results.json; the same inputs give the same bytes (no timestamps, sorted keys, one float format). Nothing
in the run folder is changed, and OUT may not be (inside) it: a card is published, a run folder is a working
folder.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from aflite.atomic import check_output_path
from aflite.card.commit import Source, check_clashes, commit_card, left_alone, manifest_text, own_files, planned_files
from aflite.card.croissant import CROISSANT, croissant_text
from aflite.card.data import DATA_FILE, parquet_of
from aflite.card.facts import FORMAT, CardInputs, build_manifest, check_license_id
from aflite.card.html import card_html, card_text
from aflite.card.render import render_card
from aflite.card.schema import CardManifest
from aflite.errors import InputError, OutputError
from aflite.rundir.lock import holding_lock, pause_point
from aflite.rundir.names import CARD, KEPT_IDS, MANIFEST, MARKER, RESULTS
from aflite.rundir.read import read_folder, read_run
from aflite.rundir.results import Result
from aflite.rundir.schema import Body, EvaluateBody, ExplainBody

__all__ = ["CardResult", "write_card"]

CARD_RUNS = ("run", "demo")  # the folders a card is made from (a filter run has no dataset to publish)


@dataclass(repr=False)  # __repr__: one line, not the manifest
class CardResult(Result):
    """What ``aflite card`` wrote: the folder, the card, the manifest (and its facts), and the license the card
    names (``unknown`` when aflite could not tell and none was given). A Result like every command's, but its folder
    is published rather than worked in: README.md (:meth:`summary_md`) and manifest.json (:meth:`to_json`), written
    by :func:`write_card`, with the data file, no results.json and no page.

    Parameters
    ----------
    out : Path
        The card folder.
    readme : Path
        README.md.
    manifest_path : Path
        manifest.json.
    manifest : dict
        Its content (every file's size and sha256).
    license : str
        The license the card names.
    notes : list of str
        What the card says it could not tell.
    """

    command: ClassVar[str] = "card"
    out: Path
    readme: Path
    manifest_path: Path
    manifest: CardManifest
    license: str
    notes: list[str] = field(default_factory=list)  # what the caller should hear (an unknown license, ...)

    def to_json(self) -> dict[str, Any]:
        return dict(self.manifest)

    def summary_md(self) -> str:
        return self.readme.read_text(encoding="utf-8")

    def repr_line(self) -> str:
        """What ``repr`` shows (:func:`aflite.rundir.display.describe`): the card's folder, license and notes."""
        return card_text(self)

    def html_view(self) -> str:
        """What a notebook shows (:func:`aflite.rundir.display.html_of`): the same, and README.md (escaped)."""
        return card_html(self)


def _check_out(out: Path, inputs: list[tuple[str, Path]]) -> None:
    """OUT must not be an input folder or inside one, nor another command's output folder, nor (under) a file."""
    target = out.resolve()
    for flag, folder in inputs:
        src = folder.resolve()
        if target == src or src in target.parents:
            raise OutputError(f"--out {out}: is {'the' if target == src else 'inside the'} {flag} folder {folder}; "
                              f"write the card to a folder of its own")
    check_output_path(out)
    found = [n for n in (RESULTS, MARKER) if (out / n).exists()]
    if found:  # the card's files would be strays there, refused by that folder's readers
        raise OutputError(f"--out {out}: is the output folder of an aflite command ({found[0]}); write the card to a "
                          f"folder of its own")


B = TypeVar("B", bound=Body)


def _body(folder: str | Path, command: str, cls: type[B]) -> B:
    """The typed body of an evaluate or explain folder the card builds on, every file of it verified
    (:func:`aflite.rundir.read.read_folder`); a folder another command made is refused in one line."""
    body = read_folder(folder, (command,), flag=f"--{command}").body
    assert isinstance(body, cls), "read_folder builds the body of the command that made the folder"
    return body


def write_card(run_dir: str | Path, out: str | Path, *, evaluate: str | Path | None = None,
               explain: str | Path | None = None, license: str | None = None,  # noqa: A002 - the card's field
               ) -> CardResult:
    """Write the dataset card of the run in ``run_dir`` to ``out``: README.md, a copy of the run's filtered data
    file and, last, manifest.json (every file's sha256: ``aflite verify`` checks a downloaded copy against it).

    ``evaluate`` and ``explain``: folders of ``aflite evaluate`` / ``aflite explain`` made from this run (refused
    when made from another run or dataset); ``license``: a Hub license identifier, used when aflite does not know
    the input's own (the bundled sample's is known). A card already in ``out`` is replaced whole; a file there
    that aflite card did not write is never replaced: a name clash is refused. Every check comes before the first
    write, and a kill at any moment leaves the previous card, the new one, or a folder that says it is unfinished
    (:mod:`aflite.card.commit`).

    Parameters
    ----------
    run_dir : path
        The run folder of ``aflite run``.
    out : path or RunFolder
        The card folder to write.
    evaluate : path, optional
        A folder of ``aflite evaluate`` made from this run.
    explain : path, optional
        A folder of ``aflite explain`` made from this run.
    license : str, optional
        A Hub license identifier, when aflite does not know the input's own.

    Returns
    -------
    CardResult
        The card, its manifest and the license it names.
    """
    license = check_license_id(license)  # noqa: A001
    run_p, out_p = Path(run_dir), Path(out)
    folders = [("run", run_p)] + [(flag, Path(f)) for flag, f in (("--evaluate", evaluate), ("--explain", explain))
                                  if f is not None]
    _check_out(out_p, folders)
    # every folder is read through rundir.read: its results.json checked, every file verified against the manifest
    # the command committed, all before the first write
    run = read_run(run_p, flag="RUN_DIR", commands=CARD_RUNS)
    kept = run.kept_ids()
    if len(kept) != run.body.size_after:
        raise InputError(f"{run_p / KEPT_IDS}: {len(kept):,} ids, but results.json says the run kept "
                         f"{run.body.size_after:,}: the folder was changed after the run")
    filtered = run_p / Path(str(run.body.filtered_dataset)).name
    if filtered.name not in run.envelope.manifest and not filtered.is_dir():
        raise InputError(f"{filtered}: not listed in {run_p / RESULTS}: the run's filtered data file is missing")
    inp = CardInputs(run_p, run, kept)
    if evaluate is not None:
        inp.evaluate_dir, inp.evaluate = Path(evaluate), _body(evaluate, "evaluate", EvaluateBody)
    if explain is not None:
        inp.explain_dir, inp.explain = Path(explain), _body(explain, "explain", ExplainBody)
    built = build_manifest(inp, license=license)
    data: dict[str, Source]
    if filtered.is_dir():  # a saved dataset folder: typed Arrow already, copied file by file
        data = dict(planned_files(filtered))
        built["output"]["data"] = {"file": filtered.name, "format": "arrow", "columns": None}
    else:  # every other format as Parquet, where the loader reads each value as written (aflite.card.data)
        parquet, columns = parquet_of(filtered, built["output"]["format"])
        data = {DATA_FILE: parquet}
        built["output"]["data"] = {"file": DATA_FILE, "format": "parquet", "columns": columns,
                                   "sha256": hashlib.sha256(parquet).hexdigest()}
    if {CARD, MANIFEST, CROISSANT} & set(data):
        raise InputError(f"{filtered}: the run's data file is named like the card's own files ({CARD}, {MANIFEST}, "
                         f"{CROISSANT})")
    facts: CardManifest = json.loads(manifest_text(built))  # as manifest.json will hold them
    sources: dict[str, Source] = {**data, CARD: render_card(facts).encode("utf-8")}
    if DATA_FILE in data:  # the same facts in Croissant, for the platforms that read it (aflite.card.croissant)
        made = data[DATA_FILE]
        assert isinstance(made, bytes), "made in memory above"
        sources[CROISSANT] = croissant_text(facts, DATA_FILE, made).encode("utf-8")
    check_clashes(out_p, sources, own_files(out_p))
    out_p.mkdir(parents=True, exist_ok=True)
    with holding_lock(out_p, "--out"):  # one writer at a time, as every command's folder (aflite.rundir.lock)
        pause_point("card-locked")
        notes = [f"{out_p / n}: listed in {MANIFEST} but not the bytes aflite card wrote there (or not a plain "
                 f"file of the folder): left alone" for n in left_alone(out_p) if n not in sources]
        manifest = commit_card(out_p, sources, facts, FORMAT)
    if manifest["license"]["id"] == "unknown":
        notes.insert(0, f"license unknown: {manifest['license']['source']}")
    return CardResult(out_p, out_p / CARD, out_p / MANIFEST, manifest, manifest["license"]["id"], notes)
