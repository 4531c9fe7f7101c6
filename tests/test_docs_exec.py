"""The documentation's code is executed: every ``aflite …`` command of README.md and docs/guide/*.md parses with the
real parser (no abbreviations, only options that exist, value lists as the parser has them), and every shell and
Python block runs on small data in a temporary folder — exit code 0 and the files its comments promise — unless
the line before it says ``<!-- not run: REASON -->`` (tests/docs_blocks.py; CONTRIBUTING.md)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from docs_blocks import (
    PAGES,
    PYTHON_PRELUDE,
    ROOT,
    SHELLS,
    Block,
    Command,
    blocks,
    code_blocks,
    make_data,
    mentioned_commands,
    option_problems,
    parse_problem,
    python_comment_commands,
    shell_commands,
    strict_parser,
)


def _aflite_commands() -> list[tuple[Block, Command]]:
    return [(b, c) for b in code_blocks() if b.lang in SHELLS for c in shell_commands(b) if c.argv[0] == "aflite"]


def test_the_pages_hold_commands_and_code() -> None:
    """The extraction sees what the pages hold (a regression here would make every other test vacuous)."""
    assert len(_aflite_commands()) >= 40
    assert sum(b.lang == "python" for b in code_blocks()) >= 8
    assert len(mentioned_commands()) >= 20
    evaluate = [c for b, c in _aflite_commands() if b.page.name == "evaluate.md" and c.argv[1] == "evaluate"]
    assert evaluate and "--models" in evaluate[0].argv  # a continued line is one command


def test_the_not_run_mark_needs_a_reason(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("text\n\n<!-- not run: a CUDA GPU -->\n```bash\naflite run x --device cuda\n```\n\n"
                    "```bash\naflite demo  # writes ./aflite-demo\n```\n", encoding="utf-8")
    marked, plain = blocks(page)
    assert (marked.not_run, marked.line) == ("a CUDA GPU", 4) and plain.not_run is None
    assert shell_commands(plain)[0].argv == ["aflite", "demo"]
    for b in code_blocks():
        assert b.not_run is None or len(b.not_run) >= 3, f"{b.where}: say why the block is not run"


def test_every_command_in_a_shell_block_parses() -> None:
    """Each ``aflite`` line of a shell block is a whole command line the parser accepts as written."""
    parser = strict_parser()
    problems = []
    for block, command in _aflite_commands():
        found = option_problems(command.argv, parser)
        error = parse_problem(command.argv, parser)
        if error:
            found.append(error)
        problems += [f"{block.page.relative_to(ROOT)}:{command.line}: {p}" for p in found]
    assert problems == []


def test_every_command_the_prose_names_has_those_options() -> None:
    """``aflite …`` in inline code and in Python comments (``# aflite evaluate DATA RUN --out eval``): the command
    exists and has each option exactly as written, with the value list the parser has."""
    parser = strict_parser()
    problems = [f"{where}: {p}" for where, argv in mentioned_commands() for p in option_problems(argv, parser)]
    assert problems == []


def test_the_checker_catches_what_it_is_for() -> None:
    parser = strict_parser()
    assert option_problems(["aflite", "evaluate", "DATA", "--runs", "run"], parser) == \
        ["aflite evaluate has no option --runs"]
    assert option_problems(["aflite", "embed", "x", "--cache", "c"], parser) == ["aflite embed has no option --cache"]
    assert parse_problem(["aflite", "embed", "x.tsv", "--out", "o", "--cache", "c"], parser)  # abbreviations off
    assert parse_problem(["aflite", "run", "x.tsv", "--out", "o"], parser) is None
    assert option_problems(["aflite", "run", "x", "--groups", "premise|none|COLUMN"], parser)


# ---------------------------------------------------------------------------------------------- running
def _env(work: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AFLITE_", "PYTEST"))}
    env.update(PYTHONPATH=os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
               OMP_NUM_THREADS="1", BROWSER="true", MPLBACKEND="Agg", HOME=str(work / "home"),
               HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    (work / "home").mkdir(exist_ok=True)
    return env


def _out_of(argv: list[str]) -> str | None:
    for k, token in enumerate(argv):
        if token == "--out" and k + 1 < len(argv):
            return argv[k + 1]
        if token.startswith("--out="):
            return token.split("=", 1)[1]
    return None


def _missing(command: Command, work: Path) -> list[str]:
    """The files a command's comment promises (``my-run/filtered.tsv``, or ``results.json`` in its --out) that it
    did not write; its --out folder must exist."""
    out = _out_of(command.argv)
    missing = [f"{out}/" for _ in [0] if out is not None and not (work / out).is_dir()]
    for name in command.files:
        path = work / name if "/" in name or out is None else work / out / name
        if not path.exists():
            missing.append(str(path.relative_to(work)))
    return missing


def _run_shell(block: Block, work: Path, env: dict[str, str]) -> list[str]:
    failures = []
    for command in shell_commands(block):
        if command.argv[0] == "aflite":
            argv = [sys.executable, "-m", "aflite", *command.argv[1:]]
        else:
            argv = ["bash", "-c", shlex.join(command.argv)]
        proc = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=900)
        where = f"{block.page.relative_to(ROOT)}:{command.line}: {shlex.join(command.argv)}"
        if proc.returncode != 0:
            failures.append(f"{where}: exit {proc.returncode}: {(proc.stderr or proc.stdout).strip()[-600:]}")
            break  # the next lines build on this one
        failures += [f"{where}: did not write {m}" for m in _missing(command, work)]
    return failures


def _run_python(block: Block, work: Path, env: dict[str, str]) -> list[str]:
    script = work / f"block_{block.line}.py"
    script.write_text(PYTHON_PRELUDE + block.body, encoding="utf-8")
    proc = subprocess.run([sys.executable, script.name], cwd=work, env=env, capture_output=True, text=True,
                          timeout=900)
    if proc.returncode != 0:
        return [f"{block.where}: exit {proc.returncode}: {proc.stderr.strip()[-800:]}"]
    failures = []
    for command in python_comment_commands(block):  # `# aflite … --out X  (files)`: the call below wrote them
        failures += [f"{block.page.relative_to(ROOT)}:{command.line}: did not write {m}"
                     for m in _missing(command, work)]
    return failures


def _pages_with_runnable_blocks() -> list[Path]:
    return [p for p in PAGES if any(b.not_run is None and b.lang in (*SHELLS, "python") for b in blocks(p))]


@pytest.mark.slow  # minutes: every example of every page, MiniLM Φ included, on 240 rows
@pytest.mark.parametrize("page", _pages_with_runnable_blocks(), ids=lambda p: p.name)
def test_every_block_of_the_page_runs(page: Path, tmp_path: Path) -> None:
    """The page's blocks, in order, in one folder holding the data files they name: each command exits 0 and
    writes what its comment promises; each Python block runs to the end."""
    pytest.importorskip("torch", reason="the examples use the [text] extra")
    make_data(tmp_path)
    env = _env(tmp_path)
    failures: list[str] = []
    for block in blocks(page):
        if block.not_run is not None or block.lang not in (*SHELLS, "python"):
            continue
        failures += _run_shell(block, tmp_path, env) if block.lang in SHELLS else _run_python(block, tmp_path, env)
        if failures:
            break
    assert failures == []
