#!/usr/bin/env python3
"""tl-bench's PyTorch peer: the same tests in PyTorch eager (transformers, HF generate) on
the GPU, printed as tl-bench rows. Runs on the device machine (torch and transformers are
there); tl-bench runs it with --peer and puts its rows beside its own:
  tl-bench MODEL.onnx --peer 'python3 scripts/bench_torch.py DIR --dtype fp16'
  python3 scripts/bench_torch.py DIR [--dtype fp16|fp32] [-p LIST] [-n LIST] [-d LIST] [-r N] [-o jsonl|md]
DIR holds the transformers config.json of the model (scripts/export_real.py writes one beside
each export). The model is built from it with random weights, on the GPU: its speed does not
depend on the weights' values, so the ONNX file's own weights are not needed.
Tests as tl-bench's: ppP times one forward of P tokens after a depth-D cache; tgN times N
decode steps of HF generate after a context of max(D, 1) tokens (generate of N + 1 tokens
less generate of 1, which holds the context's prefill); one warm-up, then -r repetitions.
"""
import argparse, sys, time

import peer_rows  # beside this script
import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM

ap = argparse.ArgumentParser(usage=__doc__.split("\n")[4].strip())
ap.add_argument("dir")
ap.add_argument("--dtype", choices=["fp16", "fp32", "bf16"], default="fp16")
ap.add_argument("-p", default="128")
ap.add_argument("-n", default="128")
ap.add_argument("-d", default="0")
ap.add_argument("-r", type=int, default=5)
ap.add_argument("-o", choices=["jsonl", "md"], default="md")
ap.add_argument("--name", help="the model's name in the rows (default: DIR's name)")
ap.add_argument("--attn", default="sdpa", help="attn_implementation (sdpa, eager)")
a = ap.parse_args()
ints = lambda s: [int(x) for x in s.split(",") if x != ""]
dtype = {"fp16": torch.float16, "fp32": torch.float32, "bf16": torch.bfloat16}[a.dtype]
cfg = AutoConfig.from_pretrained(a.dir)
cfg._attn_implementation = a.attn
torch.manual_seed(0)
with torch.device("cuda"):
    try:
        model = AutoModelForCausalLM.from_config(cfg, dtype=dtype)
    except TypeError:  # transformers before 4.56 names it torch_dtype
        model = AutoModelForCausalLM.from_config(cfg, torch_dtype=dtype)
model.eval()
model.generation_config.pad_token_id = 0
vocab = cfg.vocab_size
gen = torch.Generator(device="cuda").manual_seed(1)
ids = lambda n: torch.randint(0, vocab, (1, n), device="cuda", generator=gen)


def sync_time(f):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = f()
    torch.cuda.synchronize()
    return time.perf_counter() - t0, out


@torch.no_grad()
def once(t):
    if t["prompt"]:
        cache = None
        if t["depth"]:
            cache = model(input_ids=ids(t["depth"]), use_cache=True).past_key_values
        x = ids(t["prompt"])
        s, _ = sync_time(lambda: model(input_ids=x, past_key_values=cache, use_cache=True))
        return s
    ctx = ids(max(t["depth"], 1))
    mask = torch.ones_like(ctx)
    run = lambda n: model.generate(ctx, attention_mask=mask, max_new_tokens=n, min_new_tokens=n, do_sample=False)
    one, _ = sync_time(lambda: run(1))
    full, out = sync_time(lambda: run(t["gen"] + 1))
    assert out.shape[1] == ctx.shape[1] + t["gen"] + 1
    return full - one


# What a test moves per token in this precision, by tl-bench's definition (docs/tl-bench.md):
# each weight once (the input embedding only in the rows gathered, unless the LM head
# reads it too), the cache read in full (past and new rows) and the new rows written.
params = {p.data_ptr(): p for p in model.parameters()}
weight_bytes = sum(p.numel() * p.element_size() for p in params.values())
emb = model.get_input_embeddings().weight
head = model.get_output_embeddings()
tied = head is not None and head.weight.data_ptr() == emb.data_ptr()
kv_heads = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
kv_row = 2 * cfg.num_hidden_layers * kv_heads * head_dim * emb.element_size()


def bytes_per_token(t):
    table = emb.numel() * emb.element_size()  # read once at most, however many rows are gathered
    weights = lambda tokens: weight_bytes if tied else weight_bytes - table + min(table, tokens * emb.shape[1] * emb.element_size())
    return peer_rows.bytes_per_token(weights, kv_row, t["prompt"], t["gen"], t["depth"])


tests = []
for d in ints(a.d) or [0]:
    tests += [dict(prompt=p, gen=0, depth=d) for p in ints(a.p)]
    tests += [dict(prompt=0, gen=n, depth=d) for n in ints(a.n)]
engine = f"torch {torch.__version__.split('+')[0]} eager {a.dtype} ({a.attn}, HF generate)"
device = "cuda: " + torch.cuda.get_device_name()
rows = []
for t in tests:
    name = (f"pp{t['prompt']}" if t["prompt"] else f"tg{t['gen']}") + (f"@d{t['depth']}" if t["depth"] else "")
    print(f"bench_torch: {name}: warm-up", file=sys.stderr, flush=True)
    once(t)
    samples = []
    for r in range(a.r):
        print(f"bench_torch: {name}: {r + 1}/{a.r}", file=sys.stderr, flush=True)
        samples.append((t["prompt"] or t["gen"]) / once(t))
    avg = sum(samples) / len(samples)
    sd = (sum((x - avg) ** 2 for x in samples) / (len(samples) - 1)) ** 0.5 if len(samples) > 1 else 0.0
    rows.append(dict(model=a.name or a.dir.rstrip("/").split("/")[-1], engine=engine, device=device, test=name,
                     n_prompt=t["prompt"], n_gen=t["gen"], n_depth=t["depth"], reps=len(samples),
                     avg_ts=avg, stddev_ts=sd, samples_ts=samples, weight_bytes=weight_bytes,
                     bytes_per_token=bytes_per_token(t)))
peer_rows.print_rows(rows, a.o)
