"""CPU inference of the text encoders with ONNX Runtime, in fp32 or dynamic int8 (the optional ``[onnx]`` extra).

Why: on CPUs computing Φ is where users wait (MiniLM-L6 costs ~21 MFLOP per token, and torch fp32 already runs
near half of an AVX2 host's fp32 peak), so the remaining speed is in int8 GEMMs. The encoder is exported once
with ``torch.onnx.export`` (mean pooling inside the graph), cached under ``<cache>/onnx/`` keyed by the content
hash of its weights (so a fine-tuned encoder gets its own file), written atomically. The int8 model is ONNX
Runtime's dynamic quantisation with per-channel weights, keeping the FFN down-projections (the MatMuls whose
weight shrinks the width, e.g. 1536 → 384) in fp32: measured on SNLI dev pairs, per-tensor weights gave mean
cosine 0.959 to torch's Φ, per-channel 0.994, per-channel with fp32 down-projections 0.997 (docs/embed.md).

Tokenization, length-sorted batching, mean pooling over the attention mask and L2 normalisation are those of
the torch path (:mod:`aflite.encoders`). Batches run side by side, one ONNX Runtime thread each (the thread
policy of :mod:`aflite.threads`), so that each row's output does not depend on the number of threads.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import logging
import os
import shutil
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from aflite.errors import ParameterError
from aflite.threads import budget

__all__ = ["BACKENDS", "CPU_DEFAULT", "note_once", "onnx_available", "resolve_backend", "weights_hash",
           "load_onnxruntime", "export_folder", "export_text_model", "quantize_int8", "OnnxTextRunner", "text_runner"]

BACKENDS = ("torch", "onnx", "onnx-int8")
# the CPU default when the extra is installed: the fastest backend whose agreement with torch passed on the bench
# data (mean cosine >= 0.99 and kept-set Jaccard >= 0.9; docs/measured/bench_embed_minilm_v2.json)
CPU_DEFAULT = "onnx-int8"
_EXPORT_FORMAT = 1  # bump when the exported graph changes
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def onnx_available() -> bool:
    """True when the ``[onnx]`` extra (onnx and onnxruntime) is installed."""
    return all(importlib.util.find_spec(m) is not None for m in ("onnx", "onnxruntime"))


_NOTED: set[str] = set()  # the notes this process has printed


def note_once(text: str) -> None:
    """Print a note on stderr the first time this process meets it: one audit resolves the backend once per
    featurization (D, its views, the compared run), and the reader needs to be told once."""
    if text not in _NOTED:
        _NOTED.add(text)
        print(text, file=sys.stderr)


def resolve_backend(backend: str | None, device: str, cpu_default: str = CPU_DEFAULT) -> str:
    """``backend`` as given, or the default: torch on a GPU; on CPU ``cpu_default`` (the encoder's measured best,
    :data:`CPU_DEFAULT` for MiniLM) when the extra is installed, else torch (said in one line on stderr). An ONNX
    backend asked for on a GPU or without the extra is a :class:`ParameterError`."""
    if backend in (None, "", "auto"):
        if device != "cpu" or cpu_default == "torch":
            return "torch"
        if onnx_available():
            return cpu_default
        note_once("aflite: encoding with torch, the CPU default without the [onnx] extra (with it, pip install "
                  "'aflite[onnx]', ONNX Runtime int8: faster, and a Φ that differs slightly)")
        return "torch"
    if backend not in BACKENDS:
        raise ParameterError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)} or auto")
    if backend != "torch":
        if device != "cpu":
            raise ParameterError(f"backend {backend} runs on the CPU; use --backend torch with --device {device}")
        if not onnx_available():
            raise ParameterError(f"backend {backend} needs onnx and onnxruntime: pip install 'aflite[onnx]'")
    return backend


def weights_hash(module: Any) -> str:
    """SHA-256 of a torch module's parameters and buffers (names, shapes, dtypes and bytes), in name order."""
    h = hashlib.sha256()
    for name, t in sorted(module.state_dict().items()):
        arr = t.detach().cpu().contiguous().numpy()
        h.update(f"{name}:{arr.dtype}:{arr.shape};".encode())
        h.update(arr.tobytes())
    return h.hexdigest()


def load_onnxruntime() -> Any:
    """``onnxruntime``, imported with its telemetry off unless the user set ``ORT_DISABLE_TELEMETRY``: ONNX
    Runtime otherwise writes a device id under ``~/.cache/Microsoft`` (and a session file in the temporary folder)
    when it is imported, and aflite writes nothing outside the folders it is given."""
    os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
    import onnxruntime

    return onnxruntime


@contextlib.contextmanager
def export_folder(export_dir: str | os.PathLike[str] | None) -> Iterator[Path]:
    """Where the exported models go: ``export_dir`` (a run's ``<cache>/onnx``, kept and reused), or without a cache
    a temporary folder that is removed once the session has read the model (ONNX Runtime keeps it in memory), so
    that a call without a cache leaves no file behind (nothing under the home folder)."""
    if export_dir is not None:
        yield Path(export_dir)
        return
    with tempfile.TemporaryDirectory(prefix="aflite-onnx-") as tmp:
        yield Path(tmp)


def _pooled_module(torch: Any, model: Any) -> Any:
    class Pooled(torch.nn.Module):  # the transformer and its mean pooling as one graph
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            h = self.inner(input_ids=input_ids, attention_mask=attention_mask,
                           token_type_ids=token_type_ids).last_hidden_state
            m = attention_mask.unsqueeze(-1).to(h.dtype)
            return (h * m).sum(dim=1) / m.sum(dim=1).clamp(min=1e-9)

    return Pooled(model).eval()


def export_text_model(model: Any, torch: Any, folder: str | os.PathLike[str], key: str | None = None,
                      fuse: bool = False) -> Path:
    """The fp32 ONNX file of a Hugging Face text model with mean pooling, exported once into ``folder`` (named by
    the weights' hash ``key``) and reused when it is already there. ``fuse``: export attention as eager ops and
    apply ONNX Runtime's BERT fusions (:func:`_fuse`); measured no faster on 2 loaded cores (docs/embed.md), so the
    backends use the plain export."""

    key = key or weights_hash(model)
    dest = Path(folder) / f"text-{key[:24]}-v{_EXPORT_FORMAT}{'-fused' if fuse else ''}.onnx"
    if dest.is_file():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    raw = dest.with_name(f".{dest.name}.{os.getpid()}.raw.onnx")
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    was_training = model.training
    device = next(model.parameters()).device
    attn = getattr(model.config, "_attn_implementation", None)
    model.eval()
    ex = torch.ones((2, 8), dtype=torch.long)
    axes = {k: {0: "batch", 1: "tokens"} for k in _INPUTS} | {"pooled": {0: "batch"}}
    try:
        # eager attention exports as the MatMul/Softmax pattern that ORT fuses into one Attention op (the SDPA
        # export is not recognised); the same function (cosine 1.0 to torch's Φ)
        if fuse:
            _set_attention(model, "eager")
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(_pooled_module(torch, model).cpu(), (ex, ex, torch.zeros_like(ex)), str(raw),
                              dynamo=False, input_names=list(_INPUTS), output_names=["pooled"],
                              dynamic_axes=axes, opset_version=17)
        if not fuse or not _fuse(raw, tmp, model.config):
            os.replace(raw, tmp)
        os.replace(tmp, dest)
    finally:
        raw.unlink(missing_ok=True)
        tmp.unlink(missing_ok=True)
        if fuse and attn is not None:
            _set_attention(model, attn)
        model.to(device)
        model.train(was_training)
    return dest


def _set_attention(model: Any, impl: str) -> None:
    if hasattr(model, "set_attn_implementation"):
        try:
            model.set_attn_implementation(impl)
            return
        except (ValueError, ImportError):  # a model without that implementation: leave it as it is
            return
    model.config._attn_implementation = impl


def _fuse(src: Path, dest: Path, config: Any) -> bool:
    """ONNX Runtime's BERT graph fusions (embedding + LayerNorm, multi-head attention, bias + GELU, residual +
    LayerNorm) of ``src`` into ``dest``; False (``dest`` not written) when the optimizer cannot handle the graph."""

    heads, hidden = getattr(config, "num_attention_heads", None), getattr(config, "hidden_size", None)
    if not isinstance(heads, int) or not isinstance(hidden, int):
        return False
    quiet = logging.getLogger("onnxruntime.transformers")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        load_onnxruntime()
        from onnxruntime.transformers.optimizer import optimize_model

        optimize_model(str(src), model_type="bert", num_heads=heads, hidden_size=hidden,
                       opt_level=0).save_model_to_file(str(dest))
    except Exception as exc:  # noqa: BLE001 - an unfused graph computes the same function, only slower
        print(f"aflite: ONNX graph fusion skipped ({type(exc).__name__}: {exc})", file=sys.stderr)
        return False
    finally:
        quiet.setLevel(level)
    return True


def down_projections(model_proto: Any) -> list[str]:
    """MatMul nodes whose constant weight narrows the width (K > N): a transformer's FFN down-projections, the
    layers whose int8 rounding moved the pooled embedding most."""
    from onnx import numpy_helper

    weights = {t.name: numpy_helper.to_array(t).shape for t in model_proto.graph.initializer}
    out = []
    for node in model_proto.graph.node:
        if node.op_type == "MatMul" and len(node.input) == 2 and node.input[1] in weights:
            shape = weights[node.input[1]]
            if len(shape) == 2 and shape[0] > shape[1]:
                out.append(node.name)
    return out


def quantize_int8(fp32_path: Path, keep_fp32: bool = True) -> Path:
    """The dynamic int8 model next to ``fp32_path`` (per-channel int8 weights, down-projections in fp32 unless
    ``keep_fp32`` is False), made once and written atomically."""

    import onnx

    load_onnxruntime()
    from onnxruntime.quantization import QuantType, quantize_dynamic

    dest = fp32_path.with_name(fp32_path.stem + ("-int8.onnx" if keep_fp32 else "-int8all.onnx"))
    if dest.is_file():
        return dest
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp.onnx")
    # quantize_dynamic writes "<input>-inferred.onnx" beside its input and deletes it: a per-process link of the
    # input keeps two processes (Dask workers on one cache) from removing each other's file
    src = dest.with_name(f".{fp32_path.stem}.{os.getpid()}.src.onnx")
    keep = down_projections(onnx.load(str(fp32_path))) if keep_fp32 else []
    level = logging.getLogger().level
    logging.getLogger().setLevel(logging.ERROR)  # its "consider pre-processing" advice is not for users
    try:
        src.unlink(missing_ok=True)
        try:
            os.link(fp32_path, src)
        except OSError:
            shutil.copyfile(fp32_path, src)
        quantize_dynamic(str(src), str(tmp), weight_type=QuantType.QInt8, per_channel=True,
                         nodes_to_exclude=keep, extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
        os.replace(tmp, dest)
    finally:
        logging.getLogger().setLevel(level)
        for f in (tmp, src, src.with_name(src.stem + "-inferred.onnx")):
            f.unlink(missing_ok=True)
    return dest


class OnnxTextRunner:
    """An ONNX Runtime session of an exported text encoder: token-id items in, pooled float32 rows out."""

    def __init__(self, path: Path, dim: int, pad_id: int, threads: int | None = None) -> None:
        self.session = cpu_session(path)
        self.path, self.dim, self.pad_id = path, int(dim), int(pad_id)
        self.workers = max(1, int(threads) if threads else budget())
        self.wanted = {i.name for i in self.session.get_inputs()}

    def _batch(self, items: list[dict[str, list[int]]]) -> dict[str, np.ndarray]:
        width = max(len(it["input_ids"]) for it in items)
        out: dict[str, np.ndarray] = {}
        for key in _INPUTS:
            if key not in self.wanted:
                continue
            arr = np.full((len(items), width), self.pad_id if key == "input_ids" else 0, dtype=np.int64)
            for r, it in enumerate(items):
                row = it.get(key)
                if row is None and key == "attention_mask":
                    row = [1] * len(it["input_ids"])
                if row is not None:
                    arr[r, : len(row)] = row
            out[key] = arr
        return out

    def embed(self, items: list[dict[str, list[int]]], *, batch_size: int = 32, normalize: bool = True,
              progress: Any = None) -> np.ndarray:
        """Rows in input order; batches in order of decreasing token length (little padding)."""
        n = len(items)
        out = np.empty((n, self.dim), dtype=np.float32)
        if n == 0:
            return out
        order = np.argsort([-len(it["input_ids"]) for it in items], kind="stable")
        chunks = [order[s : s + batch_size] for s in range(0, n, batch_size)]

        def one(idx: np.ndarray) -> None:
            emb = self.session.run(None, self._batch([items[i] for i in idx]))[0].astype(np.float32)
            if normalize:
                emb /= np.maximum(np.linalg.norm(emb, axis=1, keepdims=True), 1e-12)
            out[idx] = emb
            if progress is not None:
                progress.update(len(idx))

        map_batches(one, chunks, self.workers)
        return out


def cpu_session(path: Path) -> Any:
    """An ONNX Runtime CPU session of one thread: the runners run batches side by side instead (module docstring)."""
    ort = load_onnxruntime()
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def map_batches(fn: Callable[[np.ndarray], None], chunks: list[np.ndarray], workers: int) -> None:
    """``fn`` over every chunk, on ``workers`` threads (ONNX Runtime releases the GIL), or in order on one."""
    if workers <= 1 or len(chunks) <= 1:
        for c in chunks:
            fn(c)
        return
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for f in [pool.submit(fn, c) for c in chunks]:
            f.result()


def text_runner(model: Any, torch: Any, backend: str, *, pad_id: int, export_dir: str | os.PathLike[str] | None,
                threads: int | None = None, keep_fp32: bool = True) -> OnnxTextRunner:
    """The runner of ``backend`` ('onnx' or 'onnx-int8') for a loaded Hugging Face text model; ``keep_fp32``:
    the int8 model keeps the FFN down-projections in fp32 (see :func:`quantize_int8`)."""
    load_onnxruntime()
    with export_folder(export_dir) as folder:
        path = export_text_model(model, torch, folder)
        if backend == "onnx-int8":
            path = quantize_int8(path, keep_fp32=keep_fp32)
        return OnnxTextRunner(path, int(model.config.hidden_size), pad_id, threads)
