"""Nanoseconds per (row, model) pair of the compiled own-row pass: this version's kernel against another version's
kernels.py, alternating in one process (one thread, CPU time, best-of by repeat).

    git show 64baa57:src/aflite/kernels.py > /tmp/kernels_main.py
    python benchmarks/kernel_pair_cost.py /tmp/kernels_main.py
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time

import numpy as np

from aflite.core import kernels


def load(path: str) -> object:
    spec = importlib.util.spec_from_file_location("kernels_other", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main() -> None:
    other = load(sys.argv[1])
    mods = {"other": other, "this": kernels}
    assert all(m.available() for m in mods.values())  # type: ignore[attr-defined]
    rng = np.random.default_rng(0)
    R, nm = 2730 * 4, 64  # four of the fast solver's chunks at d = 768; each model trains on 9 % of the rows
    out: dict[str, object] = {"load_average_at_start": os.getloadavg()}
    for d in (768, 16):
        A = rng.standard_normal((R, d)).astype(np.float32)
        pos: list[int] = []
        lo: list[int] = []
        hi: list[int] = []
        for _ in range(nm):
            lo.append(len(pos))
            pos.extend(np.flatnonzero(rng.random(R) < 0.09))
            hi.append(len(pos))
        args = (np.array(pos, np.int64), np.array(lo, np.int64), np.array(hi, np.int64),
                rng.integers(0, 3, R).astype(np.int64), (0.05 * rng.standard_normal((nm, 3, d))).astype(np.float32),
                rng.standard_normal((nm, 3)), np.full(nm, 1e-4))
        ns: dict[str, list[float]] = {}
        grads = {}
        for rep in range(4):
            for name, m in mods.items():
                loss, G, Gb = np.zeros(nm), np.zeros((nm, 3, d)), np.zeros((nm, 3))
                c0 = time.process_time()
                m.own_rows_pass(A, 0, *args, loss, G, Gb)  # type: ignore[attr-defined]
                if rep:  # the first call compiles (or loads the cache)
                    ns.setdefault(name, []).append(round((time.process_time() - c0) * 1e9 / len(pos), 1))
                grads[name] = G
        rel = float(np.abs(grads["this"] - grads["other"]).max() / np.abs(grads["other"]).max())
        out[f"d{d}"] = {"ns_per_pair": ns, "gradient_max_relative_difference": rel}
    out["load_average_at_end"] = os.getloadavg()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
