"""The code in the documentation, read as a test reads it (tests/test_docs_exec.py): the fenced blocks of README.md
and docs/guide/*.md, the ``aflite …`` commands in them, in Python comments and in inline code, and the small data
files the examples name, made in a temporary folder.

A block that cannot run in a test says so on the line before its fence, with the reason::

    <!-- not run: a CUDA GPU -->
    ```bash
    aflite run train.jsonl --device cuda --out run
    ```

Every other ``bash`` and ``python`` block runs (CONTRIBUTING.md, "Documentation that runs").
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs" / "guide").glob("*.md"))]
SAMPLE = ROOT / "src" / "aflite" / "resources" / "snli_sample.tsv.gz"

_FENCE = re.compile(r"^```(?P<info>[^\n`]*)\n(?P<body>.*?)^```[ \t]*$", re.S | re.M)
_NOT_RUN = re.compile(r"<!--\s*not run:\s*(?P<why>[^>]*?)\s*-->\s*$")
_INLINE = re.compile(r"(?<!`)`(aflite [^`\n]+)`(?!`)")
_INLINE_LIST = re.compile(r"(?<!`)`(--[\w-]+) ([^`\s]*\\?\|[^`\s]*)`(?!`)")  # `--groups premise|none|COLUMN`
_PY_COMMENT = re.compile(r"#\s*(aflite [a-z]+(?: [^(#\n]*)?)")
SHELLS = ("bash", "sh", "shell", "console")


@dataclass
class Block:
    """A fenced code block: where it is, its language, its text and, if it is marked, why it is not run."""

    page: Path
    line: int
    lang: str
    body: str
    not_run: str | None = None

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


@dataclass
class Command:
    """One ``aflite …`` command (or another shell command) of a block, with its trailing comment."""

    argv: list[str]
    line: int
    comment: str = ""
    files: list[str] = field(default_factory=list)  # the files its comment promises


def blocks(page: Path) -> list[Block]:
    text = page.read_text(encoding="utf-8")
    out = []
    for m in _FENCE.finditer(text):
        lang = (m.group("info").split() or [""])[0].lower()
        start = text.count("\n", 0, m.start()) + 1
        before = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marked = _NOT_RUN.search(before)
        out.append(Block(page, start, lang, m.group("body"), marked.group("why") if marked else None))
    return out


def code_blocks() -> list[Block]:
    """The shell and Python blocks of every page (the ones that are commands or code, not output or data)."""
    return [b for page in PAGES for b in blocks(page) if b.lang in (*SHELLS, "python")]


_PROMISED = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w-]+\.(?:json|md|csv|tsv|txt|npy|html|png|parquet))\b")


def shell_commands(block: Block) -> list[Command]:
    """The commands of a shell block, continuation lines joined, split at ``&&`` and ``;``."""
    lines = block.body.splitlines()
    out: list[Command] = []
    i = 0
    while i < len(lines):
        first = i
        text = lines[i]
        while text.rstrip().endswith("\\") and i + 1 < len(lines):
            i += 1
            text = text.rstrip()[:-1] + " " + lines[i]
        i += 1
        code, _, comment = _split_comment(text)
        if not code.strip():
            continue
        tokens = shlex.split(code)
        current: list[str] = []
        for token in [*tokens, "&&"]:
            if token in ("&&", ";", "||"):
                if current:
                    out.append(Command(current, block.line + 1 + first, comment, _PROMISED.findall(comment)))
                current = []
            else:
                current.append(token)
    return out


def _split_comment(line: str) -> tuple[str, str, str]:
    """``code  # comment`` → (code, "#", comment), minding quotes."""
    quote = None
    for j, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (j == 0 or line[j - 1].isspace()):
            return line[:j], "#", line[j + 1:].strip()
    return line, "", ""


def mentioned_commands() -> list[tuple[str, list[str]]]:
    """Every ``aflite …`` written outside a shell block: inline code in the prose and tables, and the command
    lines in Python comments (``# aflite run DATA --out run``), as (where, argv)."""
    found: list[tuple[str, list[str]]] = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        prose = _FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
        for m in _INLINE.finditer(prose):
            where = f"{page.relative_to(ROOT)}:{prose.count(chr(10), 0, m.start()) + 1}"
            found.append((where, _tokens(m.group(1).replace("\\|", "|"))))
        for m in _INLINE_LIST.finditer(prose):  # an option's value list named on its own: "*" is any command
            where = f"{page.relative_to(ROOT)}:{prose.count(chr(10), 0, m.start()) + 1}"
            found.append((where, ["aflite", "*", m.group(1), m.group(2).replace("\\|", "|")]))
        for b in blocks(page):
            if b.lang != "python":
                continue
            for k, line in enumerate(b.body.splitlines()):
                for m in _PY_COMMENT.finditer(line):
                    found.append((f"{b.where.rsplit(':', 1)[0]}:{b.line + 1 + k}", _tokens(m.group(1))))
    return found


def python_comment_commands(block: Block) -> list[Command]:
    """The ``# aflite COMMAND … --out X  (file, file)`` comments of a Python block: the command the call below it
    stands for, and the files the parenthesis promises in X."""
    out = []
    for k, line in enumerate(block.body.splitlines()):
        for m in _PY_COMMENT.finditer(line):
            after = line[m.end():]
            files = _PROMISED.findall(after.split("(", 1)[1]) if "(" in after else []
            out.append(Command(_tokens(m.group(1)), block.line + 1 + k, line, files))
    return out


def _tokens(text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError:
        return text.split()


# ---------------------------------------------------------------------------------------------- the parser
def strict_parser() -> argparse.ArgumentParser:
    """aflite's own parser, with abbreviations off (``--cache`` for ``--cache-dir`` is an error) and errors raised
    as ValueError instead of exiting."""
    from aflite.cli import build_parser

    parser = build_parser()
    for p in _parsers(parser):
        p.allow_abbrev = False
        p.exit_on_error = False
        p.error = _raise  # type: ignore[method-assign]
    return parser


def _raise(message: str) -> None:
    raise ValueError(message)


def _parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    out = [parser]
    for action in parser._actions:  # noqa: SLF001
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            for sub in action.choices.values():
                out += _parsers(sub)
    return out


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))  # noqa: SLF001
    return dict(sub.choices)


def option_problems(argv: list[str], parser: argparse.ArgumentParser) -> list[str]:
    """What is wrong with the options of a (possibly partial) ``aflite COMMAND --opt …``: an unknown command, an
    option the command does not have (exactly: no abbreviations), a value list ``a|b|C`` that is not the
    option's own."""
    commands = subcommands(parser)
    if len(argv) < 2 or argv[0] != "aflite" or argv[1].startswith("-"):
        return []
    if argv[1] == "*":  # a value list for the option wherever it is: some command must list exactly those
        lists = {_listed(c._option_string_actions[argv[2]]) for c in commands.values()  # noqa: SLF001
                 if argv[2] in c._option_string_actions}  # noqa: SLF001
        return [] if argv[3] in lists else [f"{argv[2]} {argv[3]}: the parser lists {sorted(map(str, lists))}"]
    if argv[1] not in commands:
        return [f"no command 'aflite {argv[1]}'"]
    command = commands[argv[1]]
    options = command._option_string_actions  # noqa: SLF001
    problems = []
    for k, token in enumerate(argv[2:], 2):
        name = token.split("=", 1)[0]
        if not name.startswith("--") or name == "--":
            continue
        if name not in options:
            problems.append(f"aflite {argv[1]} has no option {name}")
            continue
        value = token.split("=", 1)[1] if "=" in token else (argv[k + 1] if k + 1 < len(argv) else "")
        listed = _listed(options[name])
        if "|" in value and listed is not None and value != listed:
            problems.append(f"aflite {argv[1]} {name}: the page says {value}, the parser {listed}")
    return problems


def _listed(action: argparse.Action) -> str | None:
    """An option's values as ``a|b|C``: its metavar when written so, else its choices."""
    if isinstance(action.metavar, str) and "|" in action.metavar:
        return action.metavar
    return "|".join(map(str, action.choices)) if action.choices else None


def parse_problem(argv: list[str], parser: argparse.ArgumentParser) -> str | None:
    """The parser's error for a whole command line, or None when it parses."""
    try:
        parser.parse_args(argv[1:])
    except (ValueError, argparse.ArgumentError) as exc:
        return str(exc)
    except SystemExit as exc:  # --help, --version
        return None if exc.code == 0 else f"exit {exc.code}"
    return None


# ---------------------------------------------------------------------------------------------- small data
N_ROWS = 240  # 80 premise groups of the bundled SNLI sample: every example finishes in seconds


def sample_rows(n: int = N_ROWS) -> list[dict[str, str]]:
    with gzip.open(SAMPLE, "rt", encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    return rows[:n]


def make_data(folder: Path) -> None:
    """The data files the examples name, each a few hundred rows of the bundled SNLI sample (or numbers made for
    them): tables in every format the pages show, SNLI JSONL, a HANS-format file, features with their labels,
    ids and groups."""
    rows = sample_rows()
    ids = [r["id"] for r in rows]
    labels = [r["label"] for r in rows]
    header = ["id", "premise", "hypothesis", "label"]
    for name in ("my.tsv", "data.tsv", "snli_devtest.tsv"):
        _write_table(folder / name, header, rows, "\t")
    _write_table(folder / "my.csv", header, rows, ",")
    with gzip.open(folder / "snli_dev.tsv.gz", "wt", encoding="utf-8", newline="") as f:
        f.write("\t".join(header) + "\n" + "".join("\t".join(r[h] for h in header) + "\n" for r in rows))
    for name in ("snli_dev.jsonl", "snli_train.jsonl", "snli_1.0_train.jsonl", "train.jsonl", "dev.jsonl"):
        with open(folder / name, "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps({"pairID": r["id"], "captionID": r["premise"][:40], "sentence1": r["premise"],
                                    "sentence2": r["hypothesis"], "gold_label": r["label"]}) + "\n")
    (folder / "hans").mkdir()
    with gzip.open(folder / "hans" / "evaluation_regenerated.tsv.gz", "wt", encoding="utf-8") as f:
        f.write("id\tpremise\thypothesis\tlabel\theuristic\tsubcase\ttemplate\n")
        for i, r in enumerate(rows[:60]):
            heuristic = ("lexical_overlap", "subsequence", "constituent")[i % 3]
            gold = "entailment" if r["label"] == "entailment" else "non-entailment"
            f.write(f"h{i}\t{r['premise']}\t{r['hypothesis']}\t{gold}\t{heuristic}\tsub\ttemp{i % 4}\n")
    rng = np.random.default_rng(0)
    classes = sorted(set(labels))
    y = np.array([classes.index(lab) for lab in labels])
    X = rng.normal(size=(len(rows), 8)) + y[:, None] * 0.6
    np.save(folder / "X.npy", X)
    np.save(folder / "emb.npy", X.astype(np.float32))
    np.save(folder / "y.npy", np.array(labels))
    (folder / "y.txt").write_text("\n".join(labels) + "\n", encoding="utf-8")
    (folder / "ids.txt").write_text("\n".join(ids) + "\n", encoding="utf-8")
    groups = {p: i for i, p in enumerate(dict.fromkeys(r["premise"] for r in rows))}
    _write_table(folder / "groups.csv", ["group"], [{"group": str(groups[r["premise"]])} for r in rows], ",")
    _write_table(folder / "meta.csv", ["id", "gold"], [{"id": r["id"], "gold": r["label"]} for r in rows], ",")
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"f0": X[:, 0], "f1": X[:, 1], "f2": X[:, 2], "other": X[:, 3]}),
                   folder / "feats.parquet")


def _write_table(path: Path, header: list[str], rows: list[dict[str, str]], sep: str) -> None:
    with open(path, "w", encoding="utf-8", newline="") as f:
        if sep == "\t":  # TSV as the sample is written: no quoting (the texts hold no tab or newline)
            f.write("\t".join(header) + "\n" + "".join("\t".join(r[h] for h in header) + "\n" for r in rows))
            return
        w = csv.writer(f, lineterminator="\n")
        w.writerow(header)
        w.writerows([[r[h] for h in header] for r in rows])


# Python blocks may use these names for "your data" (X, y and a group per row), as the pages do.
PYTHON_PRELUDE = """\
import numpy as _np
_rng = _np.random.default_rng(0)
y = _rng.integers(0, 3, size=300)
X = _rng.normal(size=(300, 16)) + y[:, None] * 0.5
premise_ids = _np.arange(300) // 3
"""
