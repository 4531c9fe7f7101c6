"""`aflite audit` on 300 real MNIST digits (30 per class from ../shared/data/images/mnist_5k), coloured with the
coloured-MNIST benchmark's helper (benchmarks/images_coloured_mnist.py: `build`): once with the colour cue
(90 % of each class in its class's colour, the rest in another class's colour) and once without (10 %: every
digit's colour is uniform over the ten, unrelated to the class). EfficientNet-Lite0 at 64 px, one thread.

Usage (from a scratch folder; OUT relative, so that no absolute path lands in the JSON):
    OMP_NUM_THREADS=1 python /path/to/aflite/docs/measured/audit_images_mnist300.py mnist300
Writes OUT/cue<c>/train (the images), OUT/audit_cue<c>/ (the audit) and copies each results.json to
docs/measured/audit_images_mnist300_cue<c>.json (and its t-SNE map, _tsne.png).
"""
import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("cm", ROOT / "benchmarks" / "images_coloured_mnist.py")
cm = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cm)
out = Path(sys.argv[1])
for cue in (0.9, 0.1):
    cm.build(out / f"cue{cue}", cue=cue, seed=0, n_train=30, n_test=0)
    cmd = ["aflite", "audit", str(out / f"cue{cue}" / "train"), "--out", str(out / f"audit_cue{cue}"),
           "--image-size", "64", "--threads", "1", "--device", "cpu", "--quiet", "--overwrite"]
    print("$ " + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)
    dest = ROOT / "docs" / "measured" / f"audit_images_mnist300_cue{cue}"
    shutil.copy(out / f"audit_cue{cue}" / "results.json", f"{dest}.json")
    shutil.copy(out / f"audit_cue{cue}" / "tsne.png", f"{dest}_tsne.png")
