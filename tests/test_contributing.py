"""CONTRIBUTING.md's recipes (a command, a check, a featurizer flag) applied exactly as its code blocks say, read
from the page itself so that the page cannot drift: on a copy of the repository, the new command, check and flag
work, ``git status`` lists only the files the blocks name and the guides ``scripts/gen_docs.py`` regenerates, and
the whole default suite passes there."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_FENCE = re.compile(r"^```(?P<info>[^\n`]*)\n(?P<body>.*?)^```[ \t]*$", re.S | re.M)


def recipe_blocks() -> list[tuple[str, dict[str, str], str]]:
    """The fenced blocks of CONTRIBUTING.md's "Adding a command, a check, an option": (language, attributes such
    as ``file``, body), in page order."""
    page = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    section = page[page.index("## Adding a command, a check, an option"):page.index("## Module map")]
    blocks = []
    for m in _FENCE.finditer(section):
        lang, *attrs = shlex.split(m["info"])
        blocks.append((lang, dict(a.split("=", 1) for a in attrs), m["body"]))
    return blocks


def test_the_recipes_are_new_files_diffs_and_one_command() -> None:
    """The default suite's guard on the page: every block is a new file, a diff or the regeneration, and the
    three recipes are all there (the slow test below applies them)."""
    blocks = recipe_blocks()
    files = [attrs["file"] for lang, attrs, _ in blocks if "file" in attrs]
    # new files only: none is in the repository (the slow test's copy holds them untracked, applied)
    tracked = set(subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True)
                  .stdout.decode().split("\0"))
    assert files and not any(f in tracked for f in files), sorted(set(files) & tracked)
    assert {lang for lang, attrs, _ in blocks if "file" not in attrs} == {"diff", "bash"}
    diffs = [body for lang, _, body in blocks if lang == "diff"]
    assert len(diffs) == 4 and all(body.startswith(("--- a/src/aflite/", "--- a/README.md")) for body in diffs)
    assert any(f.startswith("src/aflite/cli/") for f in files) and any(f.startswith("docs/guide/") for f in files)


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


def _run(copy: Path, *argv: str, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(copy / "src"), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, *argv], cwd=copy, env=env, capture_output=True, text=True,
                          timeout=timeout)


def _apply(copy: Path) -> set[str]:
    """Every recipe block applied in ``copy``, in page order; the files the blocks name."""
    named = set()
    for lang, attrs, body in recipe_blocks():
        if "file" in attrs:
            (copy / attrs["file"]).write_text(body, encoding="utf-8")
            named.add(attrs["file"])
        elif lang == "diff":
            done = subprocess.run(["git", "apply", "-"], cwd=copy, input=body, capture_output=True, text=True)
            assert done.returncode == 0, done.stderr
            named.update(re.findall(r"^\+\+\+ b/(\S+)", body, flags=re.M))
        else:
            for line in filter(None, body.splitlines()):
                argv = shlex.split(line)
                assert argv[0] == "python", line
                done = _run(copy, *argv[1:])
                assert done.returncode == 0, done.stdout + done.stderr
    return named


@pytest.mark.slow  # a copy of the repository and its whole default suite: minutes
def test_contributing_s_recipes_as_written_pass_the_whole_suite(tmp_path: Path) -> None:
    copy = _copy_repository(tmp_path / "repo")
    named = _apply(copy)
    data = tmp_path / "pairs.tsv"
    data.write_text("id\tpremise\thypothesis\tlabel\n" + "".join(
        f"r{i}\tA man sits {i % 5}.\tHe {('sits', 'runs', 'eats')[i % 3]} {'word ' * (i % 7)}now\t"
        f"{('yes', 'no')[i % 2]}\n" for i in range(120)), encoding="utf-8")

    out = tmp_path / "words"  # the command: it runs, and aflite report rebuilds its page from the declaration
    assert _run(copy, "-m", "aflite", "words", str(data), "--out", str(out)).returncode == 0
    page = (out / "report.html").read_bytes()
    (out / "report.html").unlink()
    assert _run(copy, "-m", "aflite", "report", str(out)).returncode == 0
    assert (out / "report.html").read_bytes() == page
    listed = _run(copy, "-m", "aflite", "--help").stdout
    assert listed.index("\n    words ") > listed.index("\n    synthetic")

    shown = _run(copy, "-m", "aflite", "run", "--help").stdout  # the flag, its default from the spec
    assert "keep buckets seen in this many rows (featurizers: ngram; default 2)" in " ".join(shown.split())
    run = tmp_path / "run"
    done = _run(copy, "-m", "aflite", "run", str(data), "--out", str(run), "-f", "ngram", "--min-df", "1", "-m", "4",
                "--no-probe", "--quiet")
    assert done.returncode == 0, done.stderr
    assert '"min_df": 1' in (run / "results.json").read_text(encoding="utf-8")
    refused = _run(copy, "-m", "aflite", "run", str(data), "--out", str(tmp_path / "r2"), "-f", "minilm",
                   "--min-df", "1")
    assert refused.returncode == 2 and "--min-df: featurizer minilm does not take it" in refused.stderr

    assert "hypothesis_length:factor" in _run(copy, "-m", "aflite", "explain", "--help").stdout  # the check
    done = _run(copy, "-m", "aflite", "explain", str(data), str(run), "--out", str(tmp_path / "ex"), "--quiet")
    assert done.returncode == 0, done.stderr
    header = (tmp_path / "ex" / "instances.csv").read_text(encoding="utf-8").splitlines()[0]
    assert header.endswith(",hypothesis_length_score,hypothesis_length_flag")

    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=copy, check=True,
                            capture_output=True, text=True).stdout.splitlines()
    changed = {line[3:] for line in status}
    assert named <= changed and all(f.startswith("docs/guide/") for f in changed - named), sorted(changed - named)

    suite = _run(copy, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", timeout=1800)  # the whole default suite
    assert suite.returncode == 0, suite.stdout[-4000:]
