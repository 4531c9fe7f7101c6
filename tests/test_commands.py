"""A command registers once (aflite.rundir.commands): its CLI module's ``COMMAND`` declaration gives the CLI's
table, ``aflite report``'s lookup, the body a reader checks and its guide; a built-in check is registered where it
is defined; a featurizer's flag is one option declared beside its constructor. Proved on a copy of the repository: a
new command added as new files only runs, gets its page rebuilt by ``aflite report`` and passes the docs and keyword
tests; a new check is one class in one file; a new flag is one declaration in the featurizer's module."""

from __future__ import annotations

import importlib
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from aflite.cli import COMMANDS, command_modules
from aflite.rundir.commands import declarations, load, result_class
from aflite.rundir.page import page_class
from aflite.rundir.schema import body_class

ROOT = Path(__file__).resolve().parents[1]


def test_the_command_table_the_pages_and_the_bodies_come_from_the_declarations() -> None:
    declared = declarations()
    assert COMMANDS == tuple(declared) and COMMANDS[:2] == ("demo", "run") and "report" in COMMANDS
    for name, command in declared.items():
        module = command_modules()[name]
        assert module.COMMAND.name == name and module.LIBRARY[0] == command.library, name  # one library call
        assert callable(load(command.library)), name
        assert (ROOT / "docs" / "guide" / f"{name}.md").is_file(), name  # its guide, named after it (the rule the
        # guide index states instead of a hand-kept list)
        cls = result_class(name)
        if cls is not None and cls.has_page:
            assert page_class(name) is cls, name  # aflite report rebuilds its page with the class it declares
        if command.body is not None:
            assert body_class(name) is load(command.body) and name in body_class(name).commands, name
    index = (ROOT / "docs" / "guide" / "README.md").read_text(encoding="utf-8")
    assert "`docs/guide/<command>.md`" in index
    listed = re.findall(r"^- \[[^]]+\]\(([\w./]+\.md)\)", index, flags=re.M)
    assert listed and not {Path(p).stem for p in listed} & set(declared)  # no command listed by hand


# ------------------------------------------------------------------ a new command, as new files only
LIBRARY_MODULE = '''
"""aflite words: the words of each hypothesis (a toy command added as new files only)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from aflite.data import load_dataset
from aflite.report.explorer import render
from aflite.report.rows import instance_columns, table_columns
from aflite.rundir.schema import Body, Document
from aflite.rundir.folder import RunFolder, claims
from aflite.rundir.names import INSTANCES
from aflite.rundir.page import PageData
from aflite.rundir.read import read_columns
from aflite.rundir.results import Result, Table


@dataclass(frozen=True)
class WordsBody(Body):
    """results.json's body of aflite words."""

    commands: ClassVar[tuple[str, ...]] = ("words",)
    required: ClassVar[tuple[str, ...]] = ("rows", "longest")
    rows: int = 0
    longest: int = 0


@dataclass(repr=False)
class WordsResult(Result):
    command: ClassVar[str] = "words"
    out: Path
    ids: list[str] = field(default_factory=list)
    hypotheses: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        counts = [len(h.split()) for h in self.hypotheses]
        return {"verdict": [f"The longest hypothesis has {max(counts)} words."], "rows": len(counts),
                "longest": max(counts)}

    def summary_md(self) -> str:
        return "# aflite words\\n"

    def table(self) -> Table:
        return Table(("id", "words"), [[i, len(h.split())] for i, h in zip(self.ids, self.hypotheses, strict=True)])

    def page(self, document: Document) -> str:
        assert isinstance(document.body, WordsBody)  # the page gets results.json typed, as page_of does
        t = self.table()
        return render(_page(document.body.rows, table_columns(t.columns, t.rows), t.name))

    @classmethod
    def page_of(cls, folder: Path, document: Document) -> PageData:
        assert isinstance(document.body, WordsBody)
        return _page(document.body.rows, read_columns(folder / INSTANCES), folder / INSTANCES)


def _page(rows: int, columns: dict[str, list[str]], where: Any) -> PageData:
    data = {"kind": "words", "plots": {}, "cols": instance_columns(columns, where)}
    return PageData("aflite words", "The words of each hypothesis.", data, [("rows", rows)])


@claims("words")
def words(data_path: str | os.PathLike[str], out: Any, *, overwrite: bool = False) -> WordsResult:
    """The words of each hypothesis of DATA, into the folder ``out``."""
    ds = load_dataset(data_path)
    result = WordsResult(Path(out), [str(i) for i in ds.ids], [str(h) for h in ds.texts_b])
    RunFolder.of(out, "words").finish(result)
    return result
'''

CLI_MODULE = '''
"""``aflite words DATA --out DIR``: the words of each hypothesis."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aflite.cli.flags import add_out, add_overwrite_option, claim_out_folder
from aflite.rundir.commands import COMMANDS

COMMAND = COMMANDS["words"]
LIBRARY = (COMMAND.library,)


def register(sub: Any) -> None:
    p = sub.add_parser("words", help="the words of each hypothesis")
    p.add_argument("data_path", type=Path, help="a pair dataset")
    add_out(p)
    add_overwrite_option(p)
    claim_out_folder(p)
    p.set_defaults(handler=run)


def run(args: Any) -> int:
    from aflite.commands.words import words

    words(args.data_path, args.out_folder)
    return 0
'''

ENTRY = """    Command("words", "aflite.cli.words", "aflite.commands.words:words", "aflite.commands.words:WordsResult",
            "aflite.commands.words:WordsBody"),
"""

GUIDE = """# aflite words

The words of each hypothesis.

<!-- BEGIN generated:options -->
<!-- END generated:options -->
"""

CHECK = '''

@register  # a built-in check: registered where it is defined
class HypothesisLength(Check):
    """Per row, the words of its hypothesis."""

    name: ClassVar[str] = "hypothesis_length"
    options: ClassVar[tuple[Option, ...]] = (
        Option("factor", float, 2.0, "flag rows over this many times the median length"),)

    def find(self, data: CheckData) -> CheckResult:
        words = np.asarray([len(t.split()) for t in data.texts or []], dtype=float)
        return CheckResult(self.name, words, words > self.params["factor"] * np.median(words))
'''


def _copy_repository(to: Path) -> Path:
    """The repository's files as git sees them (tracked and new, not ignored), committed in a fresh repository."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                            capture_output=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        if (ROOT / name).is_file():
            (to / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, to / name)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q"], cwd=to, check=True)
    subprocess.run(["git", "add", "-A"], cwd=to, check=True)
    subprocess.run([*git, "commit", "-qm", "copy"], cwd=to, check=True)
    return to


def _run(copy: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(copy / "src"), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, *argv], cwd=copy, env=env, capture_output=True, text=True, timeout=600)


def _status(copy: Path) -> list[str]:
    return subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=copy, check=True,
                          capture_output=True, text=True).stdout.splitlines()


@pytest.mark.slow  # a copy of the repository and pytest in it: over 6 s on 2 cores
def test_a_new_command_is_new_files_only_a_new_check_one_class_a_new_flag_one_option(tmp_path: Path) -> None:
    copy = _copy_repository(tmp_path / "repo")
    (copy / "src" / "aflite" / "commands" / "words.py").write_text(LIBRARY_MODULE.lstrip(), encoding="utf-8")
    (copy / "src" / "aflite" / "cli" / "words.py").write_text(CLI_MODULE.lstrip(), encoding="utf-8")
    guide = copy / "docs" / "guide" / "words.md"
    guide.write_text(GUIDE, encoding="utf-8")
    table = copy / "src" / "aflite" / "rundir" / "commands.py"  # its one entry in the table of commands
    text = table.read_text(encoding="utf-8")
    assert text.count(")}\n") == 1
    table.write_text(text.replace(")}\n", ENTRY + ")}\n"), encoding="utf-8")
    filled = _run(copy, "-c", textwrap.dedent("""
        import importlib.util, pathlib
        spec = importlib.util.spec_from_file_location("gen_docs", "scripts/gen_docs.py")
        g = importlib.util.module_from_spec(spec); spec.loader.exec_module(g)
        page = pathlib.Path("docs/guide/words.md")
        page.write_text(g.replace_block(page.read_text(), "options", g.options_help("words")))
    """))
    assert filled.returncode == 0, filled.stderr

    data = copy / "pairs.tsv"
    data.write_text("id\tpremise\thypothesis\tlabel\n" + "".join(
        f"r{i}\tA man sits.\t{'word ' * (1 + i % 7)}end\t{('yes', 'no')[i % 2]}\n" for i in range(40)))
    out = tmp_path / "words"
    done = _run(copy, "-m", "aflite", "words", str(data), "--out", str(out))
    assert done.returncode == 0, done.stderr
    page = (out / "report.html").read_bytes()
    (out / "report.html").unlink()
    again = _run(copy, "-m", "aflite", "report", str(out))  # the page rebuilt through the declaration alone
    assert again.returncode == 0, again.stderr
    assert (out / "report.html").read_bytes() == page
    listed = _run(copy, "-m", "aflite", "--help")
    assert listed.returncode == 0 and listed.stdout.index("\n    words ") > listed.stdout.index("\n    synthetic")
    body = _run(copy, "-c", "from aflite.rundir.schema import body_class; print(body_class('words').__name__)")
    assert body.stdout.strip() == "WordsBody", body.stderr
    tests = _run(copy, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_docs.py",
                 "tests/test_cli_keywords.py", "tests/test_commands.py", "-k",
                 "guide or generated or keyword or flag or declarations")
    assert tests.returncode == 0, tests.stdout[-3000:]
    data.unlink()
    assert sorted(_status(copy)) == [" M src/aflite/rundir/commands.py", "?? docs/guide/words.md",
                                     "?? src/aflite/cli/words.py", "?? src/aflite/commands/words.py"]

    checks_module = copy / "src" / "aflite" / "explain" / "checks.py"
    checks_module.write_text(checks_module.read_text(encoding="utf-8") + CHECK, encoding="utf-8")
    registry = copy / "src" / "aflite" / "check" / "__init__.py"  # and its one entry in the table of checks
    last = '    "ngram_coefficients": f"{_EXPLAIN}:NgramCoefficients",\n'
    text = registry.read_text(encoding="utf-8")
    assert last in text
    registry.write_text(text.replace(last, last + '    "hypothesis_length": f"{_EXPLAIN}:HypothesisLength",\n'),
                        encoding="utf-8")
    shown = _run(copy, "-m", "aflite", "explain", "--help")
    assert shown.returncode == 0 and "hypothesis_length:factor" in shown.stdout, shown.stderr
    names = _run(copy, "-c", "from aflite import check; print(check.check_names('explain'))")
    assert "'ngram_coefficients', 'hypothesis_length')" in names.stdout, names.stderr
    assert [line for line in _status(copy) if not line.startswith("??")] == [
        " M src/aflite/check/__init__.py", " M src/aflite/explain/checks.py", " M src/aflite/rundir/commands.py"]

    # a featurizer's option offered as a flag: one declaration, beside the constructor keyword it sets
    ngram = copy / "src" / "aflite" / "features" / "ngram.py"
    text = ngram.read_text(encoding="utf-8")
    declared = '        Option("min_df", int, valid=lambda v: v >= 1, rule="must be >= 1"),'
    assert declared in text
    ngram.write_text(text.replace(declared, declared[:-2] + ', help="keep buckets seen in this many rows",\n'
                                  '               commands=("run", "embed")),'), encoding="utf-8")
    shown = _run(copy, "-m", "aflite", "run", "--help")
    assert "--min-df MIN_DF" in shown.stdout  # its default read from the constructor, stated nowhere else
    assert "keep buckets seen in this many rows (featurizers: ngram; default 2)" in " ".join(shown.stdout.split())
    small = copy / "small.tsv"
    small.write_text("id\tpremise\thypothesis\tlabel\n" + "".join(
        f"r{i}\tA man sits {i % 5}.\tHe {('sits', 'runs', 'eats')[i % 3]} now\t{('yes', 'no')[i % 2]}\n"
        for i in range(120)))
    done = _run(copy, "-m", "aflite", "run", str(small), "--out", str(tmp_path / "run"), "-f", "ngram", "--min-df",
                "1", "-m", "4", "--no-probe", "--quiet")
    assert done.returncode == 0, done.stderr
    assert '"min_df": 1' in (tmp_path / "run" / "results.json").read_text(encoding="utf-8")
    refused = _run(copy, "-m", "aflite", "run", str(small), "--out", str(tmp_path / "run2"), "-f", "minilm",
                   "--min-df", "1")
    assert refused.returncode == 2 and "--min-df: featurizer minilm does not take it" in refused.stderr
    small.unlink()
    assert [line for line in _status(copy) if not line.startswith("??")] == [
        " M src/aflite/check/__init__.py", " M src/aflite/explain/checks.py", " M src/aflite/features/ngram.py",
        " M src/aflite/rundir/commands.py"]


def test_the_declarations_are_read_without_importing_the_cli() -> None:
    code = ("import sys; from aflite.rundir.commands import declarations; declarations(); "
            "print(sorted(m for m in sys.modules if m.startswith('aflite.cli')))")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
    importlib.import_module("aflite.cli")  # and the CLI's own table agrees (above)
