"""The package's layering, read from its source (docs/architecture.md): every import, at module level or inside a
function, points down the layer order; there is no import loop; no library module imports the CLI; no module takes
another package's ``_private`` name; no module is over 500 lines."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PKG = SRC / "aflite"
MAX_LINES = 500

# Bottom to top. A module may import modules of its own layer or of a lower one, never of a higher one. A name is
# matched by its longest prefix here ("aflite.data" covers aflite.data.images). docs/architecture.md shows this
# table; keep them together.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("ground", ("aflite", "aflite.errors", "aflite.atomic", "aflite.hashing", "aflite.device", "aflite.threads",
                "aflite.splits", "aflite.jit", "aflite.group_folds", "aflite.defaults", "aflite.links",
                "aflite.progress", "aflite.option")),
    ("data", ("aflite.data",)),
    ("cluster", ("aflite.cluster",)),
    ("features", ("aflite.features", "aflite.encoders")),
    ("core", ("aflite.core", "aflite.rundir")),
    ("analyses", ("aflite.check", "aflite.evaluate", "aflite.audit", "aflite.explain", "aflite.report",
                  "aflite.verdict")),
    ("commands", ("aflite.commands", "aflite.card")),
    ("experiments", ("aflite.experiments",)),
    ("cli", ("aflite.cli", "aflite.__main__")),
]


def _modules() -> dict[str, Path]:
    mods: dict[str, Path] = {}
    for p in PKG.rglob("*.py"):
        parts = list(p.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = p
    return mods


MODULES = _modules()


def _owner(name: str) -> str | None:
    """The aflite module an imported dotted name lives in (longest known prefix)."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def _imports(module: str) -> list[tuple[str, str, int]]:
    """(target module, imported name or '', line) for every aflite import in ``module``, in functions too."""
    path = MODULES[module]
    base = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: list[tuple[str, str, int]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            pairs = [(a.name, "") for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = base.split(".")[: len(base.split(".")) - (node.level - 1)]
                full = ".".join(anchor + ([node.module] if node.module else []))
            else:
                full = node.module or ""
            pairs = [(full, a.name) for a in node.names]
        else:
            continue
        for full, name in pairs:
            if full != "aflite" and not full.startswith("aflite."):
                continue
            qualified = f"{full}.{name}" if name else full
            target = _owner(qualified)
            if target is None or target == module:
                continue
            # "from aflite.data import images" takes a module; "from aflite.core.filter import AFLite" a name
            out.append((target, "" if target == qualified else name, node.lineno))
    return out


def _layer(module: str) -> int:
    best, rank = -1, -1
    for i, (_, prefixes) in enumerate(LAYERS):
        for pre in prefixes:
            # the package root holds only itself; any other prefix holds its sub-modules too
            if (module == pre or (pre != "aflite" and module.startswith(pre + "."))) and len(pre) > best:
                best, rank = len(pre), i
    if rank < 0:
        raise AssertionError(f"{module} is in no layer: add it to LAYERS (and docs/architecture.md)")
    return rank


def _concept(module: str) -> str:
    """aflite.audit.runner -> audit; aflite.core.filter -> filter; aflite -> aflite."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _graph() -> dict[str, set[str]]:
    return {m: {t for t, _, _ in _imports(m)} for m in MODULES}


def _loops(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        x = stack.pop()
                        on.discard(x)
                        comp.append(x)
                        if x == v:
                            break
                    if len(comp) > 1:
                        found.append(sorted(comp))
            elif w not in index:
                index[w] = low[w] = len(index)
                stack.append(w)
                on.add(w)
                work.append((w, iter(sorted(graph[w]))))
            elif w in on:
                low[v] = min(low[v], index[w])
    return found


def test_every_module_has_a_layer() -> None:
    for m in MODULES:
        _layer(m)


def test_no_import_loop() -> None:
    assert _loops(_graph()) == []


def test_the_loop_finder_finds_a_loop() -> None:
    """The check above can fail: a two-module and a three-module loop are found, a chain is not."""
    assert _loops({"a": {"b"}, "b": {"a"}, "c": set()}) == [["a", "b"]]
    assert _loops({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c"]]
    assert _loops({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_imports_point_down() -> None:
    upward = [f"{m}:{line} imports {t} ({LAYERS[_layer(m)][0]} -> {LAYERS[_layer(t)][0]})"
              for m in MODULES for t, _, line in _imports(m) if _layer(t) > _layer(m)]
    assert upward == []


def test_no_library_module_imports_the_cli() -> None:
    bad = [f"{m}:{line} imports {t}" for m in MODULES if _layer(m) != len(LAYERS) - 1
           for t, _, line in _imports(m) if _layer(t) == len(LAYERS) - 1]
    assert bad == []


def test_no_private_name_across_packages() -> None:
    bad = [f"{m}:{line} takes {t}.{name}" for m in MODULES for t, name, line in _imports(m)
           if name.startswith("_") and not name.startswith("__") and _concept(t) != _concept(m)]
    assert bad == []


def test_modules_are_short() -> None:
    long = [f"{p.relative_to(SRC)}: {n} lines" for p in MODULES.values()
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES]
    assert long == []


def test_layers_match_the_architecture_page() -> None:
    """docs/architecture.md names every layer of LAYERS, in order."""
    page = (SRC.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    where = [page.find(f"**{name}**") for name, _ in LAYERS]
    assert -1 not in where, [name for (name, _), w in zip(LAYERS, where, strict=True) if w == -1]
    assert where == sorted(where)


@pytest.mark.parametrize("source, expect", [
    ("from aflite.cli.flags import add_out\n", "cli"),
    ("def f():\n    from aflite.commands.run import run\n", "commands"),
])
def test_the_import_reader_sees_function_level_imports(tmp_path: Path, source: str, expect: str,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """An upward import hidden inside a function is seen, as one at module level."""
    fake = tmp_path / "fake.py"
    fake.write_text(source, encoding="utf-8")
    monkeypatch.setitem(MODULES, "aflite.data.fake", fake)
    targets = [t for t, _, _ in _imports("aflite.data.fake")]
    assert targets and LAYERS[_layer(targets[0])][0] == expect and _layer(targets[0]) > _layer("aflite.data.fake")


def test_the_architecture_page_names_every_module_of_the_table() -> None:
    """Every entry of LAYERS appears in docs/architecture.md's table (as `name` or `name/`), in its layer's row."""
    page = (SRC.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    rows = {line.split("**")[1]: line for line in page.splitlines() if line.startswith("| **")}
    missing = [f"{layer}: {pre}" for layer, prefixes in LAYERS for pre in prefixes if pre != "aflite"
               and f"`{pre.removeprefix('aflite.')}`" not in rows.get(layer, "")
               and f"`{pre.removeprefix('aflite.')}/`" not in rows.get(layer, "")]
    assert missing == []


MAX_FUNCTION_LINES = 80
KERNELS = "aflite.core.kernels"  # numba kernels: one compiled loop each, kept whole on purpose


def _code_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """A function's lines, signature included, less its docstring: the public API's numpydoc Parameters sections
    (issue #58) document each parameter at length, and that length is not code to split."""
    assert node.end_lineno is not None
    lines = node.end_lineno - node.lineno + 1
    first = node.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        assert first.end_lineno is not None
        lines -= first.end_lineno - first.lineno + 1
    return lines


def test_functions_are_short() -> None:
    """No function or method over MAX_FUNCTION_LINES lines of code (signature included, the docstring not),
    outside the numba kernels."""
    long = [f"{m}.{node.name}: {_code_lines(node)} lines" for m, path in MODULES.items()
            if m != KERNELS for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and _code_lines(node) > MAX_FUNCTION_LINES]
    assert long == []


def test_no_featurizer_name_is_compared_outside_features() -> None:
    """Commands ask the featurizer registry what a featurizer does; only aflite.features compares its names (an
    evaluate model's ``kind`` may share a featurizer's name: ``ngram``, the n-gram model)."""
    from aflite.features.registry import REGISTRY

    names = set(REGISTRY)
    bad = []
    for m, path in MODULES.items():
        if m.startswith("aflite.features"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Compare):
                continue
            if not any(isinstance(c, ast.Constant) and c.value in names for c in ast.walk(node)):
                continue
            if isinstance(node.left, ast.Attribute) and node.left.attr == "kind":
                continue
            bad.append(f"{m}:{node.lineno}")
    assert bad == []


def test_library_imports_sit_at_the_top() -> None:
    """aflite's own imports sit at the top of each module, where a reader sees the dependency graph; only the CLI's
    command handlers import the library when the command runs (so that ``aflite --help`` reads neither numpy nor
    scikit-learn). The heavy optional dependencies stay out of every module's top: they are imported where they
    are used, so that an install without them still imports every module."""
    heavy = {"torch", "transformers", "dask", "distributed", "cleanlab", "plotly", "selenium", "onnxruntime",
             "pandas", "datasets"}  # pandas and datasets: aflite[hf], for in-memory data (aflite.data.memory)
    inside, heavy_at_top = [], []
    for m, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
                [a.name for a in node.names] if isinstance(node, ast.Import) else []
            heavy_at_top += [f"{m}:{node.lineno} {n}" for n in names if n.split(".")[0] in heavy]
        if m.startswith("aflite.cli"):
            continue
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("aflite"):
                    inside.append(f"{m}:{node.lineno} from {node.module}")
                elif isinstance(node, ast.Import) and any(a.name.startswith("aflite") for a in node.names):
                    inside.append(f"{m}:{node.lineno} import {node.names[0].name}")
    assert sorted(set(inside)) == []
    assert heavy_at_top == []


POSIX_ONLY = {"fcntl", "resource"}  # imported where used, so that the package imports where they do not exist


def test_the_standard_library_is_imported_at_the_top() -> None:
    """What docs/architecture.md says of imports inside functions is what the code does: in a library module, an
    import inside a function is of a third-party package (an optional extra, or a slow import deferred until used)
    or of a POSIX-only module; the standard library sits at the top."""
    wrong = []
    for m, path in MODULES.items():
        if m.startswith("aflite.cli") or m == "aflite.__main__":
            continue
        for fn in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(fn):
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else \
                    [a.name for a in node.names] if isinstance(node, ast.Import) else []
                for name in names:
                    top = name.split(".")[0]
                    if top in sys.stdlib_module_names and top not in POSIX_ONLY:
                        wrong.append(f"{m}:{node.lineno} {name}")
    assert wrong == []


def _contributing_map() -> list[tuple[str, list[Path]]]:
    """CONTRIBUTING.md's module map as (layer, files and folders it names): a bare ``minilm.py`` is in the folder
    of the path before it in the same cell."""
    page = (SRC.parent / "CONTRIBUTING.md").read_text(encoding="utf-8")
    layers = {name for name, _ in LAYERS}
    rows = []
    for line in page.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or cells[0] not in layers:
            continue
        here, paths = PKG, []
        for token in cells[1].split("`")[1::2]:
            path = PKG / token.removeprefix("aflite/") if "/" in token else here / token  # aflite/x: the root
            here = path if token.endswith("/") else path.parent
            paths.append(path)
        rows.append((cells[0], paths))
    return rows


def test_the_contributing_module_map_is_true() -> None:
    """CONTRIBUTING.md's module map (the second view of the layers, by file) names files that exist, each in the
    layer LAYERS gives it, and covers every module of the package."""
    rows = _contributing_map()
    assert rows, "no module map found in CONTRIBUTING.md"
    wrong, covered = [], []
    for layer, paths in rows:
        for path in paths:
            if not path.exists():
                wrong.append(f"{layer}: {path.relative_to(SRC)} does not exist")
                continue
            covered.append(path)
            files = sorted(path.rglob("*.py")) if path.is_dir() else [path]
            for f in files:
                module = next(m for m, p in MODULES.items() if p == f)
                if LAYERS[_layer(module)][0] != layer:
                    wrong.append(f"{module} is listed under {layer}, but LAYERS puts it in {LAYERS[_layer(module)][0]}")
    folders = {c if c.is_dir() else c.parent for c in covered}  # a package's __init__ goes with its modules
    missing = [m for m, p in MODULES.items() if not any(p == c or c in p.parents for c in covered)
               and not (p.name == "__init__.py" and p.parent in folders)]
    assert wrong == [] and missing == [], wrong + [f"{m}: not in CONTRIBUTING.md's module map" for m in missing]


def _package_graph() -> dict[str, set[str]]:
    """Which packages (and top-level modules) import which: aflite.report.inline -> aflite.check.token_summary is
    report -> check."""
    graph: dict[str, set[str]] = {}
    for m, targets in _graph().items():
        graph.setdefault(_concept(m), set()).update(_concept(t) for t in targets if _concept(t) != _concept(m))
    return graph


def test_no_two_packages_import_each_other() -> None:
    """Within a layer too the arrows point one way: a package that another imports does not import it back
    (explain writes its page with report, so report reads the tokens summary from check, not from explain)."""
    assert _loops(_package_graph()) == []
