"""``OUT/results.json``, the same envelope for every command whether it runs from the CLI or from Python.

The envelope (command, argv, seed, versions) comes first, the command's own results after it. A library
function writes it with ``argv=None`` (the process's arguments); the CLI re-stamps the file with the argv it
parsed (:func:`aflite.cli.options.write_results`), so the two give the same keys.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["results_envelope", "write_results_json"]


def results_envelope(command: str | None, argv: Sequence[str] | None = None, seed: Any = None) -> dict[str, Any]:
    """What every results.json starts with: the command, its arguments, the seed and the versions."""
    from aflite.rundir import versions

    return {
        "command": command,
        "argv": list(argv) if argv is not None else sys.argv[1:],
        "seed": seed,
        "versions": versions(),
    }


def write_results_json(out: str | Path, results: dict[str, Any] | None, *, command: str | None,
                       argv: Sequence[str] | None = None, seed: Any = None) -> Path:
    """Write ``OUT/results.json``: the envelope followed by ``results``.

    Without ``results`` the results.json already in ``out`` (written by the library) is stamped with the
    envelope instead. A ``seed`` key in the body is the default seed of the envelope.
    """
    from aflite.atomic import write_json

    path = Path(out) / "results.json"
    body: dict[str, Any]
    if results is None:
        body = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    else:
        body = dict(results)
    body_seed = body.pop("seed", None)
    for key in ("command", "argv", "versions"):
        body.pop(key, None)
    write_json(path, {**results_envelope(command, argv, seed if seed is not None else body_seed), **body})
    return path
