"""Run a child process that obeys file mode bits, even when the tests run as root (this host and CI do).

Root writes into a 0o555 folder because of CAP_DAC_OVERRIDE, so a test of a read-only folder proves nothing as
root. Dropping CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH from the bounding set before ``execve`` removes them from
the child (for uid 0 the new permitted set is inheritable | bounding, and inheritable is cleared too): the child is
still uid 0, so it reads /root (where the interpreter lives) as the owner, but a 0o555 folder is read-only for it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from functools import cache
from pathlib import Path

# prctl(PR_CAPBSET_DROP=24, cap) for CAP_DAC_OVERRIDE=1 and CAP_DAC_READ_SEARCH=2, then exec the real command:
# the fallback where util-linux's setpriv is missing.
_PRCTL = ("import ctypes, os, sys; libc = ctypes.CDLL(None, use_errno=True); "
          "bad = [c for c in (1, 2) if libc.prctl(24, c, 0, 0, 0) != 0]; "
          "sys.exit(f'prctl(PR_CAPBSET_DROP) failed: errno {ctypes.get_errno()}') if bad else "
          "os.execv(sys.argv[1], sys.argv[1:])")


def _candidates() -> list[list[str]]:
    found = []
    if shutil.which("setpriv"):
        found.append(["setpriv", "--inh-caps=-all", "--bounding-set=-dac_override,-dac_read_search"])
    found.append([sys.executable, "-c", _PRCTL])
    return found


def _cannot_write(prefix: list[str], folder: Path) -> bool:
    """Whether a child started through ``prefix`` fails to create a file in ``folder`` (0o555) with EACCES."""
    probe = "import sys\ntry:\n    open(sys.argv[1], 'x').close()\nexcept PermissionError:\n    sys.exit(3)\n"
    proc = subprocess.run([*prefix, sys.executable, "-c", probe, str(folder / "probe")],
                          capture_output=True, timeout=60)
    return proc.returncode == 3 and not (folder / "probe").exists()


@cache
def obeying_mode_bits() -> tuple[str, ...] | None:
    """A command prefix whose child cannot write into a 0o555 folder: () when not root, a capability-dropping
    prefix as root, or None when neither works (the caller skips, saying why). Checked once with a real probe, so a
    prefix that silently keeps the capability is never returned."""
    if os.geteuid() != 0:
        return ()
    base = Path(tempfile.mkdtemp(prefix="aflite-caps-"))
    try:
        (base / "ro").mkdir()
        (base / "ro").chmod(0o555)
        for prefix in _candidates():
            if _cannot_write(prefix, base / "ro"):
                return tuple(prefix)
        return None
    finally:
        (base / "ro").chmod(0o755)
        shutil.rmtree(base, ignore_errors=True)


NO_WAY = ("running as root, and neither setpriv nor prctl(PR_CAPBSET_DROP) could drop CAP_DAC_OVERRIDE: root "
          "writes into a read-only folder, so the refusal cannot be seen")
