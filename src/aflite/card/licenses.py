"""The license identifiers the Hugging Face Hub knows, so that ``--license`` is refused before anything is written
when the Hub would not recognise it (a card whose ``license:`` the Hub cannot read is shown as unlicensed).

The list is the "License identifier (to use in repo card)" column of the Hub's documentation,
https://huggingface.co/docs/hub/repositories-licenses (its source, huggingface/hub-docs
docs/hub/repositories-licenses.md at commit 008d54d, was checked against this list on 2026-11-28), plus the
identifiers the Hub added to that table later and shows on cards (``eupl-1.2``, ``llama3``…``llama4``,
``apple-amlr``, ...), typed in here because aflite reads no network at run time.
``other`` needs a ``license_name`` on the card; ``unknown`` is what the card says when no license is known.
"""

from __future__ import annotations

import difflib

__all__ = ["HUB_LICENSES", "close_matches"]

HUB_LICENSES = frozenset({
    "apache-2.0", "mit", "openrail", "bigscience-openrail-m", "creativeml-openrail-m", "bigscience-bloom-rail-1.0",
    "bigcode-openrail-m", "afl-3.0", "artistic-2.0", "bsl-1.0", "bsd", "bsd-2-clause", "bsd-3-clause",
    "bsd-3-clause-clear", "c-uda", "cc", "cc0-1.0", "cc-by-2.0", "cc-by-2.5", "cc-by-3.0", "cc-by-4.0",
    "cc-by-sa-3.0", "cc-by-sa-4.0", "cc-by-nc-2.0", "cc-by-nc-3.0", "cc-by-nc-4.0", "cc-by-nd-4.0",
    "cc-by-nc-nd-3.0", "cc-by-nc-nd-4.0", "cc-by-nc-sa-2.0", "cc-by-nc-sa-3.0", "cc-by-nc-sa-4.0",
    "cdla-sharing-1.0", "cdla-permissive-1.0", "cdla-permissive-2.0", "wtfpl", "ecl-2.0", "epl-1.0", "epl-2.0",
    "etalab-2.0", "eupl-1.1", "eupl-1.2", "agpl-3.0", "gfdl", "gpl", "gpl-2.0", "gpl-3.0", "lgpl", "lgpl-2.1",
    "lgpl-3.0", "isc", "h-research", "intel-research", "lppl-1.3c", "ms-pl", "apple-ascl", "apple-amlr", "mpl-2.0",
    "odc-by", "odbl", "openrail++", "osl-3.0", "postgresql", "ofl-1.1", "ncsa", "unlicense", "zlib", "pddl",
    "lgpl-lr", "deepfloyd-if-license", "fair-noncommercial-research-license", "llama2", "llama3", "llama3.1",
    "llama3.2", "llama3.3", "llama4", "gemma", "unknown", "other",
})


def close_matches(given: str) -> list[str]:
    """Up to three known identifiers that look like ``given`` (a typo, another spelling), for the refusal."""
    return difflib.get_close_matches(given, sorted(HUB_LICENSES), n=3, cutoff=0.6)
