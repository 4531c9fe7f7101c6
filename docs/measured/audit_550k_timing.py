"""Time the audit's metric stages on an SNLI-sized (550,152-pair) input with cached embeddings.

Embeddings: the real frozen MiniLM premise / hypothesis / pair embeddings of SNLI dev+test (19,666 pairs) tiled
to 550,152 rows plus small Gaussian noise (so rows are distinct and the spectrum is a real one); labels, texts and
premise groups tiled with them (group ids made unique per copy). Runs aflite.audit.audit(..., features=...) with
tra=False (no fine-tuning), i.e. exactly what `aflite audit --no-tra` does once the embeddings are cached, and the
HTML report.
"""
import json, sys, time, dataclasses, resource
from pathlib import Path
import numpy as np
from aflite import audit as A
from aflite.data import load_dataset
from aflite.report import write_report

N = int(sys.argv[3]) if len(sys.argv) > 3 else 550_152
cache = sys.argv[1]; out = Path(sys.argv[2]); out.mkdir(parents=True, exist_ok=True)
t0 = time.perf_counter()
ds = load_dataset('/tmp/meas/snli_devtest.tsv')
cfg = A.AuditConfig(tra=False, cache_dir=cache, show_progress=False)
feats = A.compute_features(ds, cfg)   # cached: loads the three .npy matrices
n0 = len(ds); reps = -(-N // n0)
rng = np.random.default_rng(0)
rows = np.arange(N) % n0
big = {}
for k, X in feats.items():
    Xb = np.empty((N, X.shape[1]), dtype=np.float32)
    for s in range(0, N, 50_000):
        r = rows[s:s + 50_000]
        Xb[s:s + 50_000] = X[r] + rng.normal(0, 0.01, (len(r), X.shape[1])).astype(np.float32)
    big[k] = Xb
copy = np.arange(N) // n0
groups = np.asarray([f"{g}#{c}" for g, c in zip(np.asarray(ds.groups)[rows], copy)])
bigds = dataclasses.replace(ds, texts_a=[ds.texts_a[i] for i in rows], texts_b=[ds.texts_b[i] for i in rows],
                            labels=np.asarray(ds.labels)[rows], ids=np.asarray([f"{i}#{c}" for i, c in zip(np.asarray(ds.ids)[rows], copy)]),
                            groups=groups)
t_prep = time.perf_counter() - t0
print(f"prepared {N} rows x {[x.shape[1] for x in big.values()]} in {t_prep:.1f} s", flush=True)
t1 = time.perf_counter()
res = A.audit(bigds, A.AUDIT_VIEWS, cfg, name="D (550K synthetic)", features=big)
t_audit = time.perf_counter() - t1
t2 = time.perf_counter()
write_report(out / "report.html", [res], title="550K timing")
t_report = time.perf_counter() - t2
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
d = {"n": N, "prep_seconds": round(t_prep, 1), "audit_seconds": round(t_audit, 1), "report_seconds": round(t_report, 1),
     "stage_seconds": {k: round(v, 1) for k, v in res.timings.items()}, "peak_rss_gib": round(peak, 2),
     "hypothesis": {k: res.views["hypothesis"].metrics[k] for k in ("biased_accuracy", "normal_accuracy", "delta_maj")}}
print(json.dumps(d, indent=1))
(out / "timing.json").write_text(json.dumps(d, indent=1))
