"""Sphinx configuration of the aflite documentation site.

Build it from the repository root (``pip install -e ".[docs]"``)::

    sphinx-build -W --keep-going -b html docs docs/_build/html

The pages are the Markdown guides (MyST), the quickstart notebook executed at build time (myst-nb), the command line
reference read from the parser itself (sphinx-argparse) and the Python API from the docstrings (autodoc). Warnings
are errors in CI: a broken link or cross-reference fails the build (``nitpicky``).
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))  # the checkout's aflite, installed or not
sys.path.insert(0, str(Path(__file__).resolve().parent / "_ext"))  # aflite_docs: the parser as the site shows it

from aflite_docs import css_safe_ids, link_glossary_terms, rst_text  # noqa: E402

import aflite  # noqa: E402

project = "aflite"
author = "the aflite authors"
copyright = "aflite authors, MIT license"  # noqa: A001
version = release = aflite.__version__

extensions = [
    "myst_nb",  # Markdown (MyST) and notebooks; it loads myst_parser itself
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinxarg.ext",
]
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
root_doc = "index"
exclude_patterns = [
    "_build",
    "_templates",
    "notebooks/quickstart.md",  # the notebook's committed Markdown rendering; the site executes the .ipynb itself
    "card_demo",  # a dataset card as `aflite card` writes it: a file of the release, not a page
    "notebooks/quickstart-*",  # the folders the notebook writes beside itself when run in place (git-ignored)
]
templates_path = ["_templates"]
smartquotes = False  # `--out` stays two hyphens in the help texts

# every reference must resolve: a broken link or cross-reference is a warning, and -W makes it an error
nitpicky = True
nitpick_ignore_regex = [
    # names of other libraries and of typing, which the site does not document (no network at build time, so
    # no intersphinx)
    (r"py:.*", r"(numpy|np|pandas|pd|scipy|sklearn|torch|pyarrow|datasets|dask|distributed|collections|typing"
               r"|pathlib|os|argparse|numbers|concurrent|contextlib)\..*"),
    (r"py:.*", r"(Any|Path|Callable|Sequence|Iterable|Iterator|Mapping|Literal|NDArray|ArrayLike|Self|Generator"
               r"|Union|Optional|PathLike|float|int|str|bool|dict|list|tuple|None|object|type|bytes)"),
    # aflite's internal modules, named in docstrings but not on the site (its API is the names of aflite itself)
    (r"py:.*", r"aflite\.[a-z_]+(\..+)?"),
    # a bare name in a docstring (a module's own helper, a type alias) resolves only where the site documents it;
    # the names of aflite itself are written aflite.X, and those must resolve
    (r"py:.*", r"[A-Za-z_]\w*"),
]

# MyST: the guides' links are relative file paths (readable on GitHub too); headings get anchors for #links
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]  # no dollarmath: a "$TMPDIR/..." pair became math, loaded from a CDN
suppress_warnings = ["myst.header"]  # a guide may start at ## after its title's level-1 heading

# the notebook runs at build time, in a temporary folder (its run, explain and card folders land there)
nb_execution_mode = os.environ.get("AFLITE_DOCS_EXECUTE", "cache")
nb_execution_in_temp = True
nb_execution_timeout = 900
nb_execution_raise_on_error = True
nb_execution_cache_path = str(ROOT / "docs" / "_build" / ".jupyter_cache")

autodoc_default_options = {"members": True, "exclude-members": "set_fit_request"}  # scikit-learn's routing stub
autodoc_typehints = "description"
autodoc_member_order = "bysource"
autosummary_generate = True

html_theme = "pydata_sphinx_theme"
html_title = f"aflite {release}"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "header_links_before_dropdown": 5,  # the rest under "More": short titles, so the menu fits a 1366 px screen
}
html_sidebars = {"**": ["sidebar-site-nav.html"]}  # docs/_templates: a section's pages, else the site's
html_static_path: list[str] = []
html_context = {"default_mode": "auto"}  # without it, a first visit's console says "Got invalid theme mode"

_OPTIONS = re.compile(r"<!-- BEGIN generated:options -->.*?<!-- END generated:options -->", re.S)


def _options_from_parser(app, docname: str, source: list[str]) -> None:  # noqa: ANN001
    """A guide's option list (``docs/guide/<command>.md``, the text scripts/gen_docs.py writes for GitHub readers)
    becomes, on the site, sphinx-argparse's reference of that command, read from the parser at build time."""
    if not docname.startswith("guide/"):
        return
    command = docname.split("/", 1)[1]
    directive = (f"```{{argparse}}\n:module: aflite_docs\n:func: parser\n:prog: aflite\n:path: {command}\n"
                 f":nodescription:\n```")
    source[0] = _OPTIONS.sub(lambda _m: directive, source[0])


_LINK = re.compile(r"(?<!!)\[([^\]\n]+)\]\(([^)\s#]+)(#[^)\s]*)?\)")
_DOCS = Path(__file__).resolve().parent
_NOT_PAGES = (_DOCS / "card_demo",)  # files of the repository under docs/ that are not pages (exclude_patterns)
_MOVED = {ROOT / "CONTRIBUTING.md": _DOCS / "contributing.md", ROOT / "README.md": _DOCS / "index.md"}


def _site_links(text: str, where: Path) -> str:
    """Links that work on GitHub but point outside the site (a file of the repository, a folder) become plain text;
    CONTRIBUTING.md and README.md point to their pages here. A link to nothing stays, for MyST to report."""

    def fix(m: re.Match[str]) -> str:
        label, target, anchor = m.group(1), m.group(2), m.group(3) or ""
        if "://" in target or target.startswith("mailto:"):
            return m.group(0)
        path = (where / target).resolve()
        if path in _MOVED:
            return f"[{label}]({os.path.relpath(_MOVED[path], where)}{anchor})"
        inside = _DOCS in path.parents and not any(d == path or d in path.parents for d in _NOT_PAGES)
        if not path.exists() or (path.is_file() and inside):
            return m.group(0)
        return label

    return _LINK.sub(fix, text)


def guide_toctrees(guides: list[str], commands: list[str]) -> str:
    """The user guide's two tables of contents on the site: *Commands* (each declared command with a page
    ``docs/guide/<command>.md``, in ``aflite --help`` order) and *Beyond the commands* (the folder's other pages);
    read from the declarations and the folder, so that a new command's page needs no index edit."""
    listed = [c for c in commands if c in guides]
    others = sorted(g for g in guides if g not in listed and g != "README")
    blocks = [("Commands", [f"aflite {c} <{c}>" for c in listed]), ("Beyond the commands", others)]
    return "".join(f"\n```{{toctree}}\n:caption: {caption}\n:maxdepth: 1\n\n" + "\n".join(entries) + "\n```\n"
                   for caption, entries in blocks if entries)


def _guide_index(app, docname: str, source: list[str]) -> None:  # noqa: ANN001
    if docname == "guide/README":
        from aflite.rundir.commands import declarations

        source[0] += guide_toctrees([p.stem for p in (_DOCS / "guide").glob("*.md")], list(declarations()))


def _source_links(app, docname: str, source: list[str]) -> None:  # noqa: ANN001
    source[0] = _site_links(source[0], (_DOCS / docname).parent)
    if docname.startswith("measured/"):  # raw tables linked from benchmarks.md and results.md, in no toctree
        source[0] = "---\norphan: true\n---\n" + source[0]


def _include_links(app, relative_path: Path, parent_docname: str, content: list[str]) -> None:  # noqa: ANN001
    content[0] = _site_links(content[0], (_DOCS / relative_path).resolve().parent)



# ... and autosummary's tables parse a docstring's first sentence twice: there the escapes are gone, and these
# substitutions give the text back
rst_prolog = "\n".join(f".. |{name}| replace:: \\|{name}\\|" for name in ("D", "S", "Y", "D(Φ)", "X", "V"))


def _sizes_as_text(app, what, name, obj, options, lines: list[str]) -> None:  # noqa: ANN001
    """Docstrings write sizes as |D|, |S|, |D(Φ)|: text, not reStructuredText substitutions."""
    lines[:] = [rst_text(line) or "" for line in lines]


def _numpydoc_sections(app, what, name, obj, options, lines: list[str]) -> None:  # noqa: ANN001
    """A docstring with numpydoc sections (``Parameters``/``Returns`` underlined with dashes: every public name,
    tests/test_api_docstrings.py) rendered as field lists by napoleon's numpydoc parser; the others, and every
    member's, are left as written (napoleon as an extension would read "X: Y" in a property's first line as a type).
    The types are shown as words ("int or float, default 0.1"), not as cross-references nitpicky would resolve."""
    from sphinx.ext.napoleon import Config
    from sphinx.ext.napoleon.docstring import NumpyDocstring

    if any(line.strip() in ("Parameters", "Returns") and i + 1 < len(lines) and lines[i + 1].strip()
           and set(lines[i + 1].strip()) == {"-"} for i, line in enumerate(lines)):
        config = Config(napoleon_use_param=False, napoleon_use_rtype=False, napoleon_google_docstring=False)
        lines[:] = NumpyDocstring(lines, config, app, what, name, obj, options).lines()


def setup(app):  # noqa: ANN001, ANN201
    app.connect("source-read", _options_from_parser)
    app.connect("source-read", _source_links)
    app.connect("source-read", _guide_index)
    app.connect("include-read", _include_links)
    app.connect("autodoc-process-docstring", _sizes_as_text)
    app.connect("autodoc-process-docstring", _numpydoc_sections)
    app.connect("doctree-read", css_safe_ids, priority=400)  # before the TOC collector (500) reads the ids
    app.connect("doctree-resolved", link_glossary_terms)  # docs/glossary.md, linked at each term's first use
    return {"parallel_read_safe": True}
