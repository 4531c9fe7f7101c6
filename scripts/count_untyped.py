"""#58 item 1's count: ``dict[str, Any]`` and the alias ``JSON`` in the code tokens of src (no comments, docstrings).

Usage: ``python scripts/count_untyped.py [SRC]``. Prints the total, then the count per file (largest first).
"""

from __future__ import annotations

import collections
import io
import sys
import tokenize
from pathlib import Path

SKIP = (tokenize.COMMENT, tokenize.STRING, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)


def count(path: Path) -> int:
    """Hits in one file: each ``JSON`` name and each ``dict[str, Any]``."""
    words = [t.string for t in tokenize.generate_tokens(io.StringIO(path.read_text()).readline) if t.type not in SKIP]
    return sum(w == "JSON" or (w == "dict" and words[i + 1:i + 6] == ["[", "str", ",", "Any", "]"])
               for i, w in enumerate(words))


def main() -> None:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "src")
    hits = collections.Counter({str(p): n for p in sorted(root.rglob("*.py")) if (n := count(p))})
    print(sum(hits.values()))
    for name, n in hits.most_common():
        print(n, name)


if __name__ == "__main__":
    main()
