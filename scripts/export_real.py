#!/usr/bin/env python3
"""Random-init models with the real configs of Qwen2-0.5B, TinyLlama-1.1B and Llama-2-7B,
exported fp32 in the *-past layout of ../shared/models (TorchScript exporter, opset 17;
weights as external data), for tl-bench at real sizes.

Runs on the device machine (torch and transformers are there; nothing is fetched, so the
weights are random: speed does not depend on their values). Files this large never come
back from it: export, quantize and benchmark there in one session (scripts/device_bench.sh).
usage: python3 scripts/export_real.py OUTDIR NAME...   NAME: qwen2-0.5b, tinyllama-1.1b, llama-2-7b, llama-2-7b-4l
writes OUTDIR/NAME/model.onnx (+ one external data file per weight) and OUTDIR/NAME/config.json
(the transformers config, which scripts/bench_torch.py builds the PyTorch peer from).
"""
import os, sys, time
import torch
from transformers import AutoConfig, AutoModelForCausalLM

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_dynamo import Past  # noqa: E402  (the *-past wrapper, shared)

CONFIGS = {
    "qwen2-0.5b": dict(model_type="qwen2", vocab_size=151936, hidden_size=896, intermediate_size=4864,
                       num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2,
                       max_position_embeddings=32768, rope_theta=1000000.0, rms_norm_eps=1e-6,
                       tie_word_embeddings=True),
    "tinyllama-1.1b": dict(model_type="llama", vocab_size=32000, hidden_size=2048, intermediate_size=5632,
                           num_hidden_layers=22, num_attention_heads=32, num_key_value_heads=4,
                           max_position_embeddings=2048, rope_theta=10000.0, rms_norm_eps=1e-5,
                           tie_word_embeddings=False),
    "llama-2-7b": dict(model_type="llama", vocab_size=32000, hidden_size=4096, intermediate_size=11008,
                       num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=32,
                       max_position_embeddings=4096, rope_theta=10000.0, rms_norm_eps=1e-5,
                       tie_word_embeddings=False),
}
# Llama-2-7B's layers, four of them: A/B runs of its layer kernels in a minute's export.
CONFIGS["llama-2-7b-4l"] = dict(CONFIGS["llama-2-7b"], num_hidden_layers=4)


def export(out, name):
    t0 = time.time()
    kw = dict(CONFIGS[name])
    cfg = AutoConfig.for_model(kw.pop("model_type"), attn_implementation="eager", **kw)
    torch.manual_seed(0)
    # Initialized on the GPU (minutes faster at 7B), traced on the CPU in fp32.
    with torch.device("cuda" if torch.cuda.is_available() else "cpu"):
        m = AutoModelForCausalLM.from_config(cfg)
    m = m.to("cpu").float().eval()
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    cfg.to_json_file(os.path.join(d, "config.json"))
    nl, kvh = cfg.num_hidden_layers, cfg.num_key_value_heads
    hd = cfg.hidden_size // cfg.num_attention_heads
    N, P = 5, 7
    args = (torch.randint(0, cfg.vocab_size, (1, N)), torch.ones(1, P + N, dtype=torch.int64),
            torch.arange(P, P + N).unsqueeze(0), *[torch.randn(1, kvh, P, hd) for _ in range(2 * nl)])
    past = [f"past_key_values.{i}.{kv}" for i in range(nl) for kv in ("key", "value")]
    present = [f"present.{i}.{kv}" for i in range(nl) for kv in ("key", "value")]
    dyn = {"input_ids": {0: "batch", 1: "N"}, "attention_mask": {0: "batch", 1: "sumN"},
           "position_ids": {0: "batch", 1: "N"}, "logits": {0: "batch", 1: "N"}}
    dyn.update({n: {0: "batch", 2: "past"} for n in past})
    dyn.update({n: {0: "batch", 2: "sumN"} for n in present})
    with torch.no_grad():
        torch.onnx.export(Past(m, nl), args, os.path.join(d, "model.onnx"), dynamo=False, opset_version=17,
                          input_names=["input_ids", "attention_mask", "position_ids"] + past,
                          output_names=["logits"] + present, dynamic_axes=dyn)
    params = sum(p.numel() for p in m.parameters())
    print(f"export_real: {name}: {params / 1e9:.2f} B parameters, {time.time() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    if len(sys.argv) < 3 or any(n not in CONFIGS for n in sys.argv[2:]):
        sys.exit(__doc__)
    for name in sys.argv[2:]:
        export(sys.argv[1], name)
