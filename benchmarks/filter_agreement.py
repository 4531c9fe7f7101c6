"""The filter's kept-set noise floor and the device modes side by side (aflitebench.filter_agreement), on
an SNLI-shaped synthetic problem and on a real one (SNLI dev, n-gram Φ), as JSON on stdout.

    python benchmarks/filter_agreement.py [--n 27508] [--d 768] [--device torch-cpu] [--real PATH] [--skip-real]
        [--modes device_lbfgs,device_onepass] [--variants seed,threads]
"""

from __future__ import annotations

import argparse
import json
import sys

from aflitebench.filter_agreement import filter_agreement
from aflitebench.shapes import make_snli_like

MODES = {
    "device_lbfgs": {"device_lbfgs": True},
    "device_onepass": {"device_onepass": True},
    "device_onepass_bfloat16": {"device_onepass": True, "storage": "bfloat16"},
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=27_508)
    ap.add_argument("--d", type=int, default=768)
    ap.add_argument("--device", default="torch-cpu")
    ap.add_argument("--real", default="../../shared/data/snli/dev.tsv.gz")
    ap.add_argument("--skip-real", action="store_true")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--variants", default="seed,threads,float64,perturb", help="noise variants ('' for none)")
    args = ap.parse_args()
    modes = {k: {**MODES[k], "device": args.device} for k in args.modes.split(",") if k}
    variants = tuple(v for v in args.variants.split(",") if v)

    def log(m: str) -> None:
        print(m, file=sys.stderr, flush=True)

    res = {}
    data = make_snli_like(args.n, args.d, random_state=0)
    log(f"synthetic: {data.description}")
    res["synthetic"] = {"data": data.description, **filter_agreement(data.X, data.y, modes=modes, log=log,
                                                                             variants=variants)}
    if not args.skip_real:
        from aflite import data as adata
        from aflite.features.ngram import NgramFeaturizer

        ds = adata.load_dataset(args.real)
        X = NgramFeaturizer().fit_transform(ds.texts_a, ds.texts_b)
        log(f"real: {args.real}, n-gram Φ {X.shape}")
        res["real"] = {"data": f"{args.real}, n-gram Φ (defaults)",
                       **filter_agreement(X, ds.labels, modes=modes, log=log, variants=variants)}
    print(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
