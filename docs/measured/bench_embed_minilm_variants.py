# Run as: cd <worktree> && PYTHONPATH=src APPROX=1 EAGER=1 N=1000 ROUNDS=3 python docs/measured/bench_embed_minilm_variants.py
# (2026-11-25 07:00-07:25 UTC, 2-core AMD EPYC with AVX-512 VNNI, 1-minute load 11.9-14.9: other helpers running).
# Output: docs/measured/bench_embed_minilm_variants.json. The "gelu-approx" variant was fused from the SDPA export
# (no Attention fusion: only FastGelu and SkipLayerNorm); the other fused variants from the eager export.
"""MiniLM on ONNX Runtime: graph fusions, session threading, batch size and int8 coverage, side by side."""
import json, os, sys, time, logging
import numpy as np
from aflite.data import load_dataset
from aflite.features.minilm import MiniLMFeaturizer
from aflite.encoders import onnx_text as OB
from aflite.encoders import tokenize
import onnx, onnxruntime as ort
from onnxruntime.quantization import QuantType, quantize_dynamic
from onnxruntime.transformers.optimizer import optimize_model
from onnxruntime.transformers.fusion_options import FusionOptions

N = int(os.environ.get("N", 2000)); ROUNDS = int(os.environ.get("ROUNDS", 3))
ds = load_dataset('/work/shared/data/snli/dev.tsv.gz')
a, b = list(ds.texts_a)[:N], list(ds.texts_b)[:N]
tf = MiniLMFeaturizer(backend='torch', show_progress=False)
tok, model = tf.loaded()
import torch
d = '/tmp/onnx2/minilm'; os.makedirs(d, exist_ok=True)
fp = OB.export_text_model(model, torch, d)
import copy
if os.environ.get('EAGER'):
    m2 = copy.deepcopy(model); m2.set_attn_implementation('eager') if hasattr(m2, 'set_attn_implementation') else None
    m2.config._attn_implementation = 'eager'
    fp_e = OB.export_text_model(m2, torch, d + '/eager', key='eager')
    print('eager export', fp_e)
int8_v1 = OB.quantize_int8(fp)
logging.getLogger().setLevel(logging.ERROR)
def fused(path, gelu_approx=False):
    out = f'{d}/fused{"-approx" if gelu_approx else ""}.onnx'
    if not os.path.exists(out):
        o = FusionOptions('bert'); o.enable_gelu_approximation = gelu_approx
        m = optimize_model(str(path), model_type='bert', num_heads=12, hidden_size=384, optimization_options=o, opt_level=0)
        print('fused ops', m.get_fused_operator_statistics(), flush=True)
        m.save_model_to_file(out)
    return out
def q8(path, keep_down=True, tag=''):
    out = path.replace('.onnx', f'-int8{tag}.onnx')
    if not os.path.exists(out):
        keep = OB.down_projections(onnx.load(path)) if keep_down else []
        quantize_dynamic(path, out, weight_type=QuantType.QInt8, per_channel=True, nodes_to_exclude=keep, extra_options={'DefaultTensorType': onnx.TensorProto.FLOAT})
    return out
f32 = fused(fp_e if os.environ.get('EAGER') else fp)
variants = {
  'onnx-int8 (v1: unfused)': (str(int8_v1), 1, 32),
  'onnx fp32 fused': (f32, 1, 32),
  'int8 fused, down fp32': (q8(f32), 1, 32),
  'int8 fused, all MatMuls': (q8(f32, False, '-all'), 1, 32),
  'int8 fused, down fp32, 1 session x 2 threads': (q8(f32), 2, 32),
  'int8 fused, down fp32, batch 64': (q8(f32), 1, 64),
  'int8 fused, down fp32, batch 16': (q8(f32), 1, 16),
}
if os.environ.get('APPROX'):
    variants['int8 fused gelu-approx, down fp32'] = (q8(fused(fp, True)), 1, 32)
items = tokenize(tok, a, b, 256)
runners = {}
for name, (path, intra, bs) in variants.items():
    r = OB.OnnxTextRunner(OB.Path(path), 384, tok.pad_token_id)
    if intra > 1:
        so = ort.SessionOptions(); so.intra_op_num_threads = intra; so.log_severity_level = 3
        r.session = ort.InferenceSession(path, so, providers=['CPUExecutionProvider']); r.workers = 1
    runners[name] = (r, bs)
def run(name):
    if name == 'torch': return tf.transform(a, b)
    r, bs = runners[name]; return r.embed(items, batch_size=bs)
names = ['torch', *runners]
for n in names: run(n) if n == 'torch' else runners[n][0].embed(items[:64])
times = {n: [] for n in names}; outs = {}
loads = []
for rd in range(ROUNDS):
    for n in names:
        t = time.perf_counter(); outs[n] = run(n); times[n].append(time.perf_counter() - t)
    loads.append(round(os.getloadavg()[0], 2))
    print(rd, loads[-1], {n: round(N / v[-1]) for n, v in times.items()}, flush=True)
med = {n: float(np.median(v)) for n, v in times.items()}
res = {'n_items': N, 'rounds': ROUNDS, 'loadavg_1min_per_round': loads,
       'items_per_s': {n: round(N / s, 1) for n, s in med.items()},
       'speedup': {n: round(med['torch'] / s, 3) for n, s in med.items()},
       'speedup_per_round': {n: [round(t / s, 3) for t, s in zip(times['torch'], v)] for n, v in times.items() if n != 'torch'},
       'min_cosine': {n: round(float((outs[n] * outs['torch']).sum(1).min()), 6) for n in runners},
       'mean_cosine': {n: round(float((outs[n] * outs['torch']).sum(1).mean()), 6) for n in runners}}
print(json.dumps(res, indent=1))
json.dump(res, open('docs/measured/bench_embed_minilm_variants.json', 'w'), indent=1)
