#!/usr/bin/env python3
"""Export the shared tiny architectures with torch.onnx.export(..., dynamo=True).

Runs on the device machine (torch, transformers and onnxruntime are there, nothing
is fetched): random-weight models with the config of ../shared/models/README.md,
each as *-nopast and *-past, with two test_data_set_* computed by ONNX Runtime.
usage: python3 scripts/export_dynamo.py OUTDIR [ARCH...]   (writes OUTDIR/<arch>-<variant>/...)
"""
import os, sys, traceback
import numpy as np
import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM
import onnx
from onnx import numpy_helper
import onnxruntime as ort

COMMON = dict(vocab_size=256, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, head_dim=16, intermediate_size=128,
              max_position_embeddings=512, attn_implementation="eager")
ARCHS = {
    "llama": dict(model_type="llama"),
    "qwen2": dict(model_type="qwen2"),
    "mistral": dict(model_type="mistral", sliding_window=None),
    "gemma": dict(model_type="gemma", hidden_activation="gelu_pytorch_tanh"),
    "phi3": dict(model_type="phi3", pad_token_id=0, bos_token_id=1, eos_token_id=2),
    "gpt2": dict(model_type="gpt2", n_embd=64, n_layer=2, n_head=4, n_inner=128, n_positions=512),
}


def make_model(arch):
    kw = dict(COMMON)
    kw.update(ARCHS[arch])
    mt = kw.pop("model_type")
    if arch == "gpt2":
        for k in ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                  "head_dim", "intermediate_size", "max_position_embeddings"):
            kw.pop(k)
    cfg = AutoConfig.for_model(mt, **kw)
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(cfg).eval(), cfg


class NoPast(torch.nn.Module):
    def __init__(self, m):
        super().__init__(); self.m = m

    def forward(self, input_ids, attention_mask):
        return self.m(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits


class Past(torch.nn.Module):
    """The *-past layout: (input_ids, attention_mask, position_ids, past_key_values.*) ->
    (logits, present.*), the cache as flat tensors (scripts/export_real.py uses it too)."""
    def __init__(self, m, n_layers):
        super().__init__(); self.m = m; self.n = n_layers

    def forward(self, input_ids, attention_mask, position_ids, *past):
        from transformers.cache_utils import DynamicCache
        cache = DynamicCache()
        for i in range(self.n):
            cache.update(past[2 * i], past[2 * i + 1], i)
        out = self.m(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                     past_key_values=cache, use_cache=True)
        flat = []
        pkv = out.past_key_values
        for i in range(self.n):
            layer = pkv.layers[i] if hasattr(pkv, "layers") else None
            if layer is not None:
                flat += [layer.keys, layer.values]
            else:
                flat += [pkv.key_cache[i], pkv.value_cache[i]]
        return (out.logits, *flat)


def save_set(d, k, names_in, ins, names_out, outs):
    sd = os.path.join(d, f"test_data_set_{k}")
    os.makedirs(sd, exist_ok=True)
    for j, (n, a) in enumerate(zip(names_in, ins)):
        open(os.path.join(sd, f"input_{j}.pb"), "wb").write(numpy_helper.from_array(a, n).SerializeToString())
    for j, (n, a) in enumerate(zip(names_out, outs)):
        open(os.path.join(sd, f"output_{j}.pb"), "wb").write(numpy_helper.from_array(a, n).SerializeToString())


def export(out, arch, past):
    m, cfg = make_model(arch)
    nl = cfg.num_hidden_layers
    kvh = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
    hd = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    name = f"{arch}-{'past' if past else 'nopast'}"
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    D = torch.export.Dim.DYNAMIC
    B, N, P = 2, 5, 7
    ids = torch.randint(0, 256, (B, N))
    if past:
        mod = Past(m, nl)
        mask = torch.ones(B, P + N, dtype=torch.int64)
        pos = torch.arange(P, P + N).unsqueeze(0).expand(B, N).contiguous()
        pkv = [torch.randn(B, kvh, P, hd) for _ in range(2 * nl)]
        args = (ids, mask, pos, *pkv)
        in_names = ["input_ids", "attention_mask", "position_ids"] + \
            [f"past_key_values.{i}.{kv}" for i in range(nl) for kv in ("key", "value")]
        out_names = ["logits"] + [f"present.{i}.{kv}" for i in range(nl) for kv in ("key", "value")]
        dyn = ({0: D, 1: D}, {0: D, 1: D}, {0: D, 1: D}, *[{0: D, 2: D} for _ in pkv])
        dyn = (dyn[0], dyn[1], dyn[2], tuple(dyn[3:]))
    else:
        mod = NoPast(m)
        mask = torch.ones(B, N, dtype=torch.int64)
        args = (ids, mask)
        in_names = ["input_ids", "attention_mask"]
        out_names = ["logits"]
        dyn = ({0: D, 1: D}, {0: D, 1: D})
    path = os.path.join(d, "model.onnx")
    prog = torch.onnx.export(mod, args, dynamic_shapes=dyn, input_names=in_names,
                             output_names=out_names, dynamo=True, optimize=True)
    prog.save(path, external_data=False)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    real_in = [i.name for i in sess.get_inputs()]
    real_out = [o.name for o in sess.get_outputs()]
    rng = np.random.default_rng(1)
    for k, (b, n, p) in enumerate([(1, 5, 7), (2, 3, 11)]):
        feeds = [rng.integers(0, 256, (b, n)).astype(np.int64)]
        if past:
            feeds.append(np.ones((b, p + n), np.int64))
            feeds.append(np.tile(np.arange(p, p + n, dtype=np.int64), (b, 1)))
            feeds += [rng.standard_normal((b, kvh, p, hd)).astype(np.float32) for _ in range(2 * nl)]
        else:
            feeds.append(np.ones((b, n), np.int64))
        outs = sess.run(None, dict(zip(real_in, feeds)))
        save_set(d, k, real_in, feeds, real_out, outs)
    mp = onnx.load(path)
    print(name, "ok", "opset", [(o.domain, o.version) for o in mp.opset_import],
          "inputs", [(i.name, [x.dim_param or x.dim_value for x in i.type.tensor_type.shape.dim]) for i in mp.graph.input][:3],
          "outputs", [(o.name, [x.dim_param or x.dim_value for x in o.type.tensor_type.shape.dim]) for o in mp.graph.output][:2],
          flush=True)


if __name__ == "__main__":
    print("torch", torch.__version__, "transformers", transformers.__version__, "ort", ort.__version__, "onnx", onnx.__version__)
    for arch in (sys.argv[2:] or ARCHS):
        for past in (False, True):
            try:
                export(sys.argv[1], arch, past)
            except Exception:
                print(arch, past, "FAILED")
                traceback.print_exc(limit=3)
