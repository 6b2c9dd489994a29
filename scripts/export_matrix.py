#!/usr/bin/env python3
"""Tiny random-weight exports of every architecture in the support matrix (docs/support.md).

Runs on the device machine (torch, transformers, onnxscript and onnxruntime are there;
nothing is fetched): each architecture from a tiny config, through both of PyTorch's ONNX
exporters (TorchScript `dynamo=False`, opset 17; dynamo, PyTorch's default since 2.9), a
decoder with and without a cache, as a user exports them (example inputs of one sequence),
with two test_data_set_* computed by ONNX Runtime as ../shared/models holds them.
usage: python3 scripts/export_matrix.py OUTDIR [--jobs N] [NAME...]
  NAME: an architecture (llama, qwen2_moe, bert, ...) or a cell (llama-dynamo-past)
writes OUTDIR/<arch>-<ts|dynamo>-<past|nopast>/{model.onnx,test_data_set_*} and
OUTDIR/<cell>.status (one line: "ok ..." or "failed: <reason>"): an architecture that does
not export is a cell of the matrix too.
"""
import inspect, os, subprocess, sys, time, traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# Every decoder and encoder of the matrix: transformers model_type and what its tiny config
# needs beyond the common sizes below (experts, a rotary dim that fits head_dim, ...).
DECODERS = {
    "llama": {}, "mistral": {"sliding_window": None}, "qwen2": {}, "qwen3": {},
    "mixtral": {"num_local_experts": 4, "num_experts_per_tok": 2},
    "qwen2_moe": {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 16,
                  "shared_expert_intermediate_size": 32, "decoder_sparse_step": 1},
    "qwen3_moe": {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 16,
                  "decoder_sparse_step": 1},
    "gemma": {"hidden_activation": "gelu_pytorch_tanh"}, "gemma2": {"hidden_activation": "gelu_pytorch_tanh"},
    "gemma3_text": {"hidden_activation": "gelu_pytorch_tanh", "sliding_window": 4},
    "phi3": {"pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}, "phi": {},
    "gpt2": {"n_inner": 32}, "gptj": {"rotary_dim": 4, "n_inner": 32}, "gpt_neox": {},
    "bloom": {}, "falcon": {"new_decoder_architecture": True, "num_kv_heads": 1},
    "mpt": {"expansion_ratio": 2}, "olmo": {}, "olmo2": {}, "cohere": {}, "starcoder2": {},
    "smollm3": {"pad_token_id": 0}, "stablelm": {}, "granite": {},
}
MOE = ("mixtral", "qwen2_moe", "qwen3_moe")
ENCODERS = {"bert": {}, "siglip_vision_model": {"image_size": 32, "patch_size": 8, "num_channels": 3},
            "whisper": {"pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2, "decoder_start_token_id": 3,
                        "num_mel_bins": 16, "max_source_positions": 16, "encoder_layers": 2,
                        "encoder_attention_heads": 2, "encoder_ffn_dim": 32, "decoder_layers": 1,
                        "decoder_attention_heads": 2, "decoder_ffn_dim": 32, "d_model": 16}}
# Small enough that every export lives in tests/models/matrix (a few MB in all), with every
# form still there: grouped KV heads (2 on 1), partial rotary dims (head_dim 8), 2 layers.
VOCAB = 64
SIZES = dict(vocab_size=VOCAB, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
             head_dim=8, intermediate_size=32, max_position_embeddings=256)
EXPORTERS = ("ts", "dynamo")


def tiny_config(mt):
    """The architecture's config at SIZES: each size under the name the class takes (its
    attribute_map's alias where it has one), passed to __init__ so that derived fields
    (layer types, head dims) follow."""
    from transformers import CONFIG_MAPPING
    cls = CONFIG_MAPPING[mt]
    params = set(inspect.signature(cls.__init__).parameters)
    alias = getattr(cls, "attribute_map", {})
    kw = {}
    for k, v in SIZES.items():
        own = k if k in params else alias.get(k)
        if own in params:
            kw[own] = v
    kw.update((DECODERS | ENCODERS)[mt])
    cfg = cls(**kw)
    cfg._attn_implementation = "eager"
    return cfg


def decoder(mt, past, B):
    """(module, example args, input names, output names, dynamic axes by name, data-set
    maker) of a decoder; the cache's layout is read from the model's own first call."""
    import torch
    from transformers import AutoModelForCausalLM, DynamicCache
    cfg = tiny_config(mt)
    torch.manual_seed(0)
    m = AutoModelForCausalLM.from_config(cfg).eval()
    if mt in MOE:  # transformers' default experts (grouped_mm) export in neither exporter; batched_mm
        m.set_experts_implementation("batched_mm")  # gathers each token's experts, as an export must
    N, P = 5, 7
    with torch.no_grad():
        pkv = m(input_ids=torch.randint(0, VOCAB, (1, P)), use_cache=True).past_key_values
    layers = [(l.keys, l.values) for l in pkv.layers] if hasattr(pkv, "layers") else list(zip(pkv.key_cache, pkv.value_cache))
    nl = len(layers)
    kshape, vshape = tuple(layers[0][0].shape), tuple(layers[0][1].shape)  # (batch, kv heads, past, dim)

    class Past(torch.nn.Module):
        def __init__(self):
            super().__init__(); self.m = m

        def forward(self, input_ids, attention_mask, position_ids, *past):
            cache = DynamicCache()
            for i in range(nl):
                cache.update(past[2 * i], past[2 * i + 1], i)
            out = self.m(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                         past_key_values=cache, use_cache=True)
            c = out.past_key_values
            flat = []
            for i in range(nl):
                flat += [c.layers[i].keys, c.layers[i].values] if hasattr(c, "layers") else [c.key_cache[i], c.value_cache[i]]
            return (out.logits, *flat)

    class NoPast(torch.nn.Module):
        def __init__(self):
            super().__init__(); self.m = m

        def forward(self, input_ids, attention_mask):
            return self.m(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits

    ids = torch.randint(0, VOCAB, (B, N))
    if not past:
        axes = {"input_ids": {0: "batch", 1: "N"}, "attention_mask": {0: "batch", 1: "N"}, "logits": {0: "batch", 1: "N"}}
        args = (ids, torch.ones(B, N, dtype=torch.int64))

        def data(rng, b, n, p):
            import numpy as np
            return [rng.integers(0, VOCAB, (b, n)).astype(np.int64), np.ones((b, n), np.int64)]
        return NoPast(), args, ["input_ids", "attention_mask"], ["logits"], axes, data
    pk = [f"past_key_values.{i}.{kv}" for i in range(nl) for kv in ("key", "value")]
    pr = [f"present.{i}.{kv}" for i in range(nl) for kv in ("key", "value")]
    axes = {"input_ids": {0: "batch", 1: "N"}, "attention_mask": {0: "batch", 1: "sumN"},
            "position_ids": {0: "batch", 1: "N"}, "logits": {0: "batch", 1: "N"}}
    axes.update({n: {0: "batch", 2: "past"} for n in pk})
    axes.update({n: {0: "batch", 2: "sumN"} for n in pr})
    cache = [torch.randn(B, kshape[1], P, kshape[3]) if j % 2 == 0 else torch.randn(B, vshape[1], P, vshape[3])
             for j in range(2 * nl)]
    args = (ids, torch.ones(B, P + N, dtype=torch.int64), torch.arange(P, P + N).unsqueeze(0).expand(B, N).contiguous(), *cache)

    def data(rng, b, n, p):
        import numpy as np
        feeds = [rng.integers(0, VOCAB, (b, n)).astype(np.int64), np.ones((b, p + n), np.int64),
                 np.tile(np.arange(p, p + n, dtype=np.int64), (b, 1))]
        for j in range(2 * nl):
            s = kshape if j % 2 == 0 else vshape
            feeds.append(rng.standard_normal((b, s[1], p, s[3])).astype(np.float32))
        return feeds
    return Past(), args, ["input_ids", "attention_mask", "position_ids"] + pk, ["logits"] + pr, axes, data


def encoder(mt, B):
    import numpy as np
    import torch
    import transformers
    cfg = tiny_config(mt)
    torch.manual_seed(0)
    if mt == "whisper":
        m = transformers.WhisperModel(cfg).get_encoder().eval()
        frames = 2 * cfg.max_source_positions

        class Enc(torch.nn.Module):
            def __init__(self):
                super().__init__(); self.m = m

            def forward(self, input_features):
                return self.m(input_features=input_features).last_hidden_state
        args = (torch.randn(B, cfg.num_mel_bins, frames),)
        return (Enc(), args, ["input_features"], ["last_hidden_state"],
                {"input_features": {0: "batch"}, "last_hidden_state": {0: "batch"}},
                lambda rng, b, n, p: [rng.standard_normal((b, cfg.num_mel_bins, frames)).astype(np.float32)])
    m = transformers.AutoModel.from_config(cfg).eval()
    if mt == "siglip_vision_model":
        class Vis(torch.nn.Module):
            def __init__(self):
                super().__init__(); self.m = m

            def forward(self, pixel_values):
                o = self.m(pixel_values=pixel_values)
                return o.last_hidden_state, o.pooler_output
        s = cfg.image_size
        return (Vis(), (torch.randn(B, 3, s, s),), ["pixel_values"], ["last_hidden_state", "pooler_output"],
                {"pixel_values": {0: "batch"}, "last_hidden_state": {0: "batch"}, "pooler_output": {0: "batch"}},
                lambda rng, b, n, p: [rng.standard_normal((b, 3, s, s)).astype(np.float32)])

    class Bert(torch.nn.Module):
        def __init__(self):
            super().__init__(); self.m = m

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.m(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids).last_hidden_state
    N = 5
    args = (torch.randint(0, VOCAB, (B, N)), torch.ones(B, N, dtype=torch.int64), torch.zeros(B, N, dtype=torch.int64))
    axes = {n: {0: "batch", 1: "N"} for n in ("input_ids", "attention_mask", "token_type_ids", "last_hidden_state")}

    def data(rng, b, n, p):
        mask = np.ones((b, n), np.int64)
        mask[-1, n - 2:] = 0  # the last row padded: the mask takes part
        return [rng.integers(0, VOCAB, (b, n)).astype(np.int64), mask, np.zeros((b, n), np.int64)]
    return Bert(), args, ["input_ids", "attention_mask", "token_type_ids"], ["last_hidden_state"], axes, data


def export_file(path, arch, exporter, variant, B):
    import torch
    mod, args, ins, outs, axes, data = encoder(arch, B) if arch in ENCODERS else decoder(arch, variant == "past", B)
    with torch.no_grad():
        if exporter == "ts":
            torch.onnx.export(mod, args, path, dynamo=False, opset_version=17, input_names=ins, output_names=outs,
                              dynamic_axes=axes)
        else:
            D = torch.export.Dim.DYNAMIC
            dyn = [{a: D for a in axes[n]} for n in ins]
            if variant == "past":  # the cache tensors are one *past argument
                dyn = dyn[:3] + [tuple(dyn[3:])]
            prog = torch.onnx.export(mod, args, dynamic_shapes=tuple(dyn), input_names=ins, output_names=outs,
                                     dynamo=True, optimize=True)
            prog.save(path, external_data=False)
    return data, ins


def export(out, cell):
    """Exports the cell and writes its data sets; a batch of 1 first, as a user's example
    is one sequence, and a batch of 2 where the exporter or its graph fails on that."""
    try:
        return export_from(out, cell, 1)
    except Exception as e:
        traceback.print_exc(limit=4)
        first = " ".join(f"{type(e).__name__}: {e}".split())[:160]
    return export_from(out, cell, 2) + f"; exported from a batch of 2 (from 1: {first})"


def strip_debug(g):
    """Drops the exporter's debugging records (dynamo's stack traces, FX nodes and scopes
    on every node and value: three quarters of a tiny file) from g and its subgraphs; the
    model's own metadata_props, where tl writes, stay."""
    for m in [g, *g.input, *g.output, *g.value_info, *g.initializer, *g.node]:
        if hasattr(m, "metadata_props"):
            del m.metadata_props[:]
    for n in g.node:
        for a in n.attribute:
            for sub in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                strip_debug(sub)


def export_from(out, cell, B):
    import numpy as np
    from export_dynamo import save_set  # the test_data_set_* layout, shared
    import onnx
    import onnxruntime as ort
    arch, exporter, variant = cell.rsplit("-", 2)
    d = os.path.join(out, cell)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "model.onnx")
    data, ins = export_file(path, arch, exporter, variant, B)
    mp = onnx.load(path)
    strip_debug(mp.graph)
    onnx.save(mp, path)
    onnx.checker.check_model(mp)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    real_in = [i.name for i in sess.get_inputs()]  # an exporter drops the inputs a model ignores
    real_out = [o.name for o in sess.get_outputs()]
    dynamic_batch = not mp.graph.input[0].type.tensor_type.shape.dim[0].HasField("dim_value")
    rng = np.random.default_rng(1)
    shapes = [(1, 5, 7), (2, 3, 11) if dynamic_batch else (1, 3, 11)]
    for k, (b, n, p) in enumerate(shapes):
        byname = dict(zip(ins, data(rng, b, n, p)))
        feeds = [byname[n] for n in real_in]
        save_set(d, k, real_in, feeds, real_out, sess.run(None, dict(zip(real_in, feeds))))
    opset = max(o.version for o in mp.opset_import if o.domain in ("", "ai.onnx"))
    return f"ok opset {opset}, {os.path.getsize(path)} bytes, batch {'dynamic' if dynamic_batch else 'static'}"


def cells(names):
    archs = [n for n in names if "-" not in n] or list(DECODERS) + list(ENCODERS)
    out = [n for n in names if "-" in n]
    for a in archs:
        for e in EXPORTERS:
            out += [f"{a}-{e}-nopast"] if a in ENCODERS else [f"{a}-{e}-nopast", f"{a}-{e}-past"]
    return out


def main():
    argv = sys.argv[1:]
    if not argv or argv[0].startswith("-"):
        sys.exit(__doc__)
    out, jobs = argv.pop(0), 1
    if argv[:1] == ["--jobs"]:
        jobs = int(argv[1]); argv = argv[2:]
    todo = cells(argv)
    os.makedirs(out, exist_ok=True)
    if jobs > 1:  # one process a cell: an exporter's crash, leak or hang stays in its cell
        env = dict(os.environ, OMP_NUM_THREADS="1", CUDA_VISIBLE_DEVICES="")
        pending, running = list(todo), []
        while pending or running:
            # A cell is done once its status is written: on the GPU machine a finished
            # exporter's process has lingered, spinning, as a zombie whose threads run on.
            done = lambda c: os.path.exists(os.path.join(out, c + ".status"))
            for p, t, c in running:
                if done(c) or time.time() - t > 240:
                    p.kill()
            running = [(p, t, c) for p, t, c in running if p.poll() is None and not done(c)]
            while pending and len(running) < jobs:
                c = pending.pop(0)
                log = open(os.path.join(out, c + ".log"), "w")
                running.append((subprocess.Popen([sys.executable, __file__, out, c], env=env, stdout=log, stderr=log),
                                time.time(), c))
            time.sleep(0.2)
        for c in todo:
            s = os.path.join(out, c + ".status")
            print(c, open(s).read().strip() if os.path.exists(s) else "failed: the export process died or ran past 240 s",
                  flush=True)
        return
    import torch, transformers, onnxruntime, onnx
    print("torch", torch.__version__, "transformers", transformers.__version__, "onnxruntime", onnxruntime.__version__,
          "onnx", onnx.__version__, file=sys.stderr)
    for c in todo:
        t0 = time.time()
        try:
            line = export(out, c)
        except Exception as e:
            msg = " ".join(f"{type(e).__name__}: {e}".split())
            line = "failed: " + msg[:300]
            traceback.print_exc(limit=4)
        status = os.path.join(out, c + ".status")
        open(status + ".part", "w").write(f"{line} ({time.time() - t0:.0f} s)\n")
        os.replace(status + ".part", status)  # whole, since the parent takes it as the end
        print(c, line, flush=True)


if __name__ == "__main__":
    main()
