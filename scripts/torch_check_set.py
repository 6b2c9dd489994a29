#!/usr/bin/env python3
"""A tl-run --check set for a *-past model that export_real.py wrote: N random tokens from an
empty cache through the PyTorch model (fp32, eager) rebuilt from the same config and seed,
written as DIR/test_data_set_0/{input,output}_*.pb (ONNX TensorProtos, encoded here so
that the onnx package is not needed). Runs on the device machine.
usage: python3 scripts/torch_check_set.py MODEL_DIR NAME N
"""
import os, struct, sys
import numpy as np
import torch
from transformers import AutoConfig, AutoModelForCausalLM

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_real import CONFIGS  # noqa: E402


def varint(x):
    out = b""
    while True:
        b = x & 0x7F
        x >>= 7
        out += bytes([b | (0x80 if x else 0)])
        if not x:
            return out


def tensor_proto(name, a):
    kind = {np.float32: 1, np.int64: 7}[a.dtype.type]
    body = b"".join(b"\x08" + varint(d) for d in a.shape) + b"\x10" + varint(kind)
    n, raw = name.encode(), np.ascontiguousarray(a).tobytes()
    return body + b"\x42" + varint(len(n)) + n + b"\x4a" + varint(len(raw)) + raw


def main(d, name, n):
    kw = dict(CONFIGS[name])
    cfg = AutoConfig.for_model(kw.pop("model_type"), attn_implementation="eager", **kw)
    torch.manual_seed(0)  # as export_real.py: the same weights
    with torch.device("cuda"):
        m = AutoModelForCausalLM.from_config(cfg)
    m = m.float().eval()
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, cfg.vocab_size, (1, n), generator=g)
    hd, kvh = cfg.hidden_size // cfg.num_attention_heads, cfg.num_key_value_heads
    feeds = {"input_ids": ids.numpy(), "attention_mask": np.ones((1, n), np.int64),
             "position_ids": np.arange(n, dtype=np.int64)[None]}
    for i in range(cfg.num_hidden_layers):
        for kv in ("key", "value"):
            feeds[f"past_key_values.{i}.{kv}"] = np.zeros((1, kvh, 0, hd), np.float32)
    with torch.no_grad():
        logits = m(ids.cuda()).logits.float().cpu().numpy()
    out = os.path.join(d, "test_data_set_0")
    os.makedirs(out, exist_ok=True)
    for i, (k, v) in enumerate(feeds.items()):
        open(os.path.join(out, f"input_{i}.pb"), "wb").write(tensor_proto(k, v))
    open(os.path.join(out, "output_0.pb"), "wb").write(tensor_proto("logits", logits))
    print(f"torch_check_set: {name}: {n} tokens, logits max abs {np.abs(logits).max():.3g}")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
