"""The options every ``aflite`` command shares, declared once so that each name means one thing everywhere.

One concept, one spelling:

* ``--out DIR`` — the output folder; every command writes ``DIR/results.json`` (what was computed, with the
  command line, the seed and the package versions), a readable ``DIR/summary.md`` where there is something to
  read, and its caches under ``DIR/cache/`` unless ``--cache-dir`` says otherwise.
* ``--seed N`` — the one seed every random choice flows from (``random_state`` in the library).
* ``--quiet`` — no progress bars (progress goes to stderr, results to stdout).
* ``--device`` — one resolver (:func:`aflite.device.resolve_device`) for encoders, fine-tuning and the ensemble.
* ``--text-a/--text-b/--label/--id-column`` — the columns of a generic table (auto-detected when not given);
  ``--file-format`` when the file's extension does not tell.
* ``--cache-dir DIR``, ``--overwrite``, ``--groups premise|none|twins|COLUMN``.

A flag's name is the keyword of the library function the command calls (``--cache-dir`` is ``cache_dir=``);
``tests/test_cli_keywords.py`` checks it for every command.

Results go to stdout, progress and notes to stderr.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, TypedDict, cast

from aflite.device import DEVICE_HELP
from aflite.errors import ParameterError
from aflite.features.registry import COMMAND_OPTIONS, OPTIONS, default_text, featurizer_options, option_commands, takers
from aflite.option import OptionValue

__all__ = [
    "add_out",
    "add_seed",
    "add_quiet",
    "add_device",
    "add_featurizer_flags",
    "featurizer_flag_values",
    "add_backend",
    "add_columns",
    "add_cache",
    "add_cluster",
    "add_threads",
    "claim_out_folder",
    "add_groups_option",
    "add_image_options",
    "dataset_options",
    "image_options",
    "nonnegative_int",
    "positive_int",
    "partitions",
    "size",
    "SIZE_HELP",
]

SIZE_HELP = "a count, or a fraction of |D| when written as 0.x"


# ----------------------------------------------------------------------------------------------- value types
def nonnegative_int(text: str, least: int = 0) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < least:  # one bound for every value below it
        raise argparse.ArgumentTypeError(f"must be >= {least}, got {value}")
    return value


def positive_int(text: str) -> int:
    return nonnegative_int(text, 1)


def size(text: str) -> float | int:
    """A count (an integer >= 1) or a fraction of |D| in (0, 1)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if 0 < value < 1:
        return value
    if value.is_integer() and value >= 1:
        if not text.strip().lstrip("+").isdigit():  # 1.0 or 1e3: a fraction meant as 100 %, or a count?
            raise argparse.ArgumentTypeError(
                f"{text!r} is ambiguous: write a count as a whole number (e.g. {int(value)}) or a fraction below 1 "
                f"(e.g. 0.5)")
        return int(value)
    raise argparse.ArgumentTypeError(f"{text!r} is neither a count >= 1 nor a fraction in (0, 1)")


MAX_PARTITIONS = 10_000


def partitions(text: str) -> int:
    """m, the classifiers per filtering phase: refused above MAX_PARTITIONS (each is a model fit per phase)."""
    value = positive_int(text)
    if value > MAX_PARTITIONS:
        raise argparse.ArgumentTypeError(
            f"{value:,} classifiers per phase would cost {value / 64:,.0f}x the paper's m=64 in time (every phase "
            f"fits m models); use at most {MAX_PARTITIONS:,}")
    return value


# ----------------------------------------------------------------------------------------------- options
def out_path(text: str) -> Path:
    """``--out``'s value: an empty one is refused (``Path("")`` is the current folder, never meant by accident);
    ``..`` resolved and an overlong name refused by the one rule every command follows
    (:func:`aflite.rundir.lock.spelled_path`), before anything is touched."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path; give the folder to write into (\".\" for the current one)")
    return _spelled(text)


def dir_path(text: str) -> Path:
    """A folder flag's value other than ``--out`` (``--cache-dir``): spelled by the same rule as ``--out``."""
    return _spelled(text)


def _spelled(text: str) -> Path:
    from aflite.rundir.lock import spelled_path

    try:
        return spelled_path(text)
    except ParameterError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_out(p: argparse.ArgumentParser, *, default: str | None = None, what: str = "output folder") -> None:
    """``--out DIR`` (required when there is no default)."""
    if default is None:
        p.add_argument("--out", required=True, type=out_path,
                       help=f"{what}: results.json, summary.md and cache/ are written there")
    else:
        p.add_argument("--out", type=out_path, default=Path(default),
                       help=f"{what}: results.json, summary.md and cache/ are written there (default ./{default})")


def add_seed(p: Any, *, help: str = "the one seed every random choice flows from (default 0)") -> None:  # noqa: A002
    p.add_argument("--seed", type=nonnegative_int, default=0, metavar="N", help=help)


def add_quiet(p: Any) -> None:
    p.add_argument("--quiet", action="store_true", help="no progress bars (results still go to stdout)")


def add_device(p: Any, *, what: str = "where PyTorch code runs") -> None:
    p.add_argument("--device", default="auto", help=f"{what}: {DEVICE_HELP}")


def add_backend(p: Any) -> None:
    """``--backend``: how the encoder runs (torch, or ONNX Runtime fp32/int8 on CPU)."""
    p.add_argument("--backend", default=None, choices=("auto", "torch", "onnx", "onnx-int8"),
                   help="encoder runtime (minilm, efficientnet-lite0, hf-image, warmup after fine-tuning): torch, "
                   "onnx (ONNX Runtime fp32) or onnx-int8 (default auto: on CPU with the [onnx] extra the "
                   "measured best, onnx-int8 for minilm and a text warmup; torch for the image models, on a "
                   "GPU or without the extra)")


def add_threads(p: Any) -> None:
    """``--threads N``: the thread budget of :mod:`aflite.threads` (overrides ``AFLITE_NUM_THREADS``)."""
    p.add_argument("--threads", type=positive_int, default=None, metavar="N",
                   help="CPU threads to use at most (default: the CPUs this process may use, or "
                   "$AFLITE_NUM_THREADS); small fits run one thread each, side by side")


def add_cluster(p: Any, *, what: str) -> None:
    """``--cluster ADDRESS``: a Dask scheduler address, or ``local`` / ``local:N``
    (:func:`aflite.core.backends.dask.open_executor`)."""
    p.add_argument("--cluster", default=None, metavar="ADDRESS",
                   help=f"{what} on a Dask cluster: a scheduler address (tcp://host:8786), or 'local' / 'local:N' to "
                   "start N local worker processes; the result is the same as without")


def add_cache(p: Any, *, default: str = "OUT/cache", help: str | None = None) -> None:  # noqa: A002
    """``--cache-dir DIR`` (the library's ``cache_dir=``)."""
    p.add_argument("--cache-dir", type=dir_path, default=None, metavar="DIR",
                   help=help or f"feature / model cache folder, reusable across runs (default {default})")


def add_columns(p: argparse.ArgumentParser) -> None:
    """The columns of a generic CSV/TSV/JSONL/Parquet table; auto-detected when not given."""
    g = p.add_argument_group(
        "columns (generic tables)",
        "Detected when not given: sentence1/sentence2 (SNLI, MNLI, RTE), premise/hypothesis, question/sentence "
        "(QNLI), or text/sentence/document/content for single texts; labels from label or gold_label; ids from "
        "pairID/id/idx/index (else row numbers).",
    )
    g.add_argument("--text-a", default=None, metavar="COL", help="first text (premise) column")
    g.add_argument("--text-b", default=None, metavar="COL", help="second text (hypothesis) column")
    g.add_argument("--label", default=None, metavar="COL", help="label column")
    g.add_argument("--id-column", default=None, metavar="COL", help="id column (default: row numbers)")
    g.add_argument("--file-format", default=None, choices=("tsv", "csv", "jsonl", "parquet", "hf"),
                   metavar="FORMAT", help="the file's format when its extension does not tell: tsv, csv, jsonl, "
                   "parquet or hf (a saved Hugging Face dataset)")
    g.add_argument("--max-cell-bytes", default=None, type=int, metavar="BYTES",
                   help="the most bytes one text cell may hold (default 8 MiB: 8388608); a larger one is refused, "
                   "naming its line and column")


def add_featurizer_flags(p: Any, command: str) -> None:
    """The flags of every declared featurizer option (:data:`aflite.features.registry.OPTIONS`) that ``command``
    offers, each with the featurizers that take it in its help: a featurizer registered with a new option gets its
    flag on every command that offers it, and :func:`featurizer_flag_values` routes the values back."""
    names = []
    for opt in OPTIONS.values():
        if command not in option_commands(opt):
            continue
        default = default_text(opt.name)
        p.add_argument(opt.flag, type=opt.converter(), default=None, metavar=opt.metavar,
                       help=f"{opt.help} (featurizers: {', '.join(takers(opt.name))}"
                            f"{'; ' + default if default else ''})")
        names.append(opt.name)
    p.set_defaults(featurizer_flags=tuple(names))


def featurizer_flag_values(args: argparse.Namespace, featurizer: str | None = None,
                           **command_options: OptionValue) -> dict[str, OptionValue]:
    """The featurizer options the user gave on the command line (the flags :func:`add_featurizer_flags` made, plus
    ``command_options``: the command-wide ones such as ``device``), checked against ``featurizer`` when given: a
    flag the featurizer does not take is a :class:`~aflite.errors.ParameterError` (one line, exit 2)."""
    given = {name: getattr(args, name) for name in getattr(args, "featurizer_flags", ())}
    given.update({k: v for k, v in command_options.items() if k in COMMAND_OPTIONS})
    if featurizer is None:
        return {k: v for k, v in given.items() if v is not None}
    return featurizer_options(featurizer, **given)


def claim_out_folder(p: argparse.ArgumentParser) -> None:
    """``--overwrite``, and mark the command as one whose ``--out`` is an output folder: :func:`aflite.cli.main`
    claims it (checked, marked, locked; ``--overwrite`` lets it write into a folder this command did not make) as a
    :class:`~aflite.rundir.folder.RunFolder` before the handler runs (``args.out_folder``)."""
    p.add_argument("--overwrite", action="store_true",
                   help="write into --out even when it is a non-empty folder not made by this command, or "
                   "start a run over in a folder that holds one (default: refuse)")
    p.set_defaults(output="folder")


def add_groups_option(p: argparse.ArgumentParser) -> None:
    """``--groups premise|none|twins|COLUMN``: which rows a cross-validation split keeps on one side."""
    p.add_argument("--groups", default="premise", metavar="premise|none|twins|COLUMN",
                   help="rows of one group never sit on both sides of a train/test split: premise (rows with "
                   "the same first text; the default for text pairs), none, twins (families of rows joined by a "
                   "shared premise or hypothesis: counterfactual twins stay together), or the name of a column of "
                   "DATA (e.g. a counterfactual family id)")


IMAGE_DATA_HELP = ("DATA may be a folder with one sub-folder per class, a table with a path column (relative to the "
                   "table) and a label column, or a HF dataset with an Image column")


def add_image_options(p: argparse.ArgumentParser, description: str = IMAGE_DATA_HELP) -> Any:
    """The image-input options of run, embed and audit (``--path-column``, ``--image-size``,
    ``--skip-bad-images``) in an "images" group, returned so that a command can add its own."""
    g = p.add_argument_group("images", description)
    g.add_argument("--path-column", default=None, metavar="COL",
                   help="image path column of a table / Image column of a HF dataset (default: detected)")
    g.add_argument("--image-size", type=int, default=224, help="images are resized to this square (default 224)")
    g.add_argument("--skip-bad-images", action="store_true",
                   help="leave unreadable images out (counted, listed in OUT/bad_images.txt) instead of stopping")
    return g


class ImageOptions(TypedDict):
    """Keyword arguments of :func:`aflite.data.images.load_image_dataset` that the image flags give."""

    path_column: str | None
    label: str | None
    id_column: str | None
    skip_bad_images: bool


class DatasetOptions(TypedDict, total=False):
    """Keyword arguments of :func:`aflite.data.load_dataset` that the column flags give (only those given)."""

    text_a: str
    text_b: str
    label: str
    id_column: str
    file_format: str
    max_cell_bytes: int
    groups: str


def image_options(args: argparse.Namespace) -> ImageOptions:
    """The image options the user gave."""
    return ImageOptions(path_column=getattr(args, "path_column", None), label=getattr(args, "label", None),
                        id_column=getattr(args, "id_column", None),
                        skip_bad_images=getattr(args, "skip_bad_images", False))


def dataset_options(args: argparse.Namespace) -> DatasetOptions:
    """The column options the user gave."""
    names = ("text_a", "text_b", "label", "id_column", "file_format", "max_cell_bytes")
    given = {key: value for key in names if (value := getattr(args, key, None)) or isinstance(value, int)}
    return cast(DatasetOptions, given)  # the keys are DatasetOptions' own; argparse typed the values




# what a command module's LIBRARY names besides its own library calls (as "module:attribute", imported only by the
# test that reads them, so that building the parser stays cheap)
LOADERS = ("aflite.data:load_dataset", "aflite.data.images:load_image_dataset")  # the column keywords
# every featurizer option: those declared in features.registry, and the ones every command routes to Φ
FEATURIZER_OPTIONS = ("aflite.features.registry:OPTIONS", "aflite.features.registry:COMMAND_OPTIONS")
