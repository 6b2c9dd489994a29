#!/usr/bin/env python3
"""llama.cpp as a tl-bench peer: runs llama-bench on a GGUF model and prints its results as
tl-bench rows (docs/tl-bench.md), so that `tl-bench --peer` sets them beside tl's.

  python3 scripts/bench_llamacpp.py MODEL.gguf [--llama-bench PATH] [--name NAME] [--ngl 99]
      [--threads N] [--no-fa] [-p LIST] [-n LIST] [-d LIST] [-b LIST] [-r N] [-o jsonl|md]

tl-bench appends -p, -n, -d, -r and -o jsonl (empty lists: no such tests), and -b where its
decode tests batch: the decode tests of more than one sequence run on llama-batched-bench
(beside llama-bench: --llama-batched-bench, default the same folder), -npp DEPTH (at least 1)
-ntg N -npl B, each sequence with a prompt of its own, once a repetition, its S_TG (all the
sequences' tokens over the time they took) a sample. Flash attention
is on (-fa 1) unless --no-fa. llama-bench runs one repetition more than -r and the first is
dropped, as tl-bench times tl only after a warm-up run: llama-bench's own warm-up leaves its
first timed repetition cold on CUDA (H200, Llama-2-7B dims pp128: 5,036 tok/s, then
7,928-8,100). Bytes per token follow tl-bench's definition: the weights once
(llama-bench's model size) and the KV cache read in full and the new rows written, in f16
(the cache type llama-bench uses by default), from the GGUF's own dimensions (read with
gguf-py: GGUF_PY or the llama.cpp tree's gguf-py beside llama-bench; without it the rows
carry no bytes). llama.cpp's source comes from the npm package node-llama-cpp: see
../shared/scripts/llamacpp/ for building it here (CPU) and on the GPU machine (CUDA).
"""
import argparse, json, os, statistics, subprocess, sys

import peer_rows  # beside this script

ap = argparse.ArgumentParser(usage=__doc__)
ap.add_argument("model")
ap.add_argument("--llama-bench", default=os.environ.get("LLAMA_BENCH", "llama-bench"))
ap.add_argument("--name", default="")
ap.add_argument("--ngl", type=int, default=99, help="layers on the GPU (0: CPU only)")
ap.add_argument("--threads", type=int, default=0, help="CPU threads (0: llama-bench's default)")
ap.add_argument("--no-fa", action="store_true")
ap.add_argument("-p", default="")
ap.add_argument("-n", default="")
ap.add_argument("-d", default="0")
ap.add_argument("-b", default="1")
ap.add_argument("--llama-batched-bench", default="")
ap.add_argument("-r", type=int, default=5)
ap.add_argument("-o", choices=["jsonl", "md"], default="md")
a = ap.parse_args()


def kv_row_bytes(path):
    """f16 K and V of one token over all layers, from the GGUF's metadata; None without gguf-py."""
    for d in (os.environ.get("GGUF_PY"), os.path.join(os.path.dirname(os.path.abspath(a.llama_bench)), "..", "..", "gguf-py")):
        if d and os.path.isdir(d):
            sys.path.insert(0, d)
    try:
        import gguf
    except ImportError:
        return None
    r = gguf.GGUFReader(path)
    arch = bytes(r.fields["general.architecture"].parts[-1]).decode()
    val = lambda k: int(r.fields[f"{arch}.{k}"].parts[-1][0])
    heads, kv = val("attention.head_count"), val("attention.head_count_kv")
    head_dim = val("embedding_length") // heads
    return 2 * val("block_count") * kv * head_dim * 2


ints = lambda s: [int(x) for x in s.split(",") if x.strip()]
batches = ints(a.b) or [1]
gens = ints(a.n) if 1 in batches else []
cmd = [a.llama_bench, "-m", a.model, "-p", ",".join(map(str, ints(a.p))) or "0",
       "-n", ",".join(map(str, gens)) or "0", "-d", ",".join(map(str, ints(a.d))) or "0",
       "-r", str(a.r + 1), "-ngl", str(a.ngl), "-fa", "0" if a.no_fa else "1", "-o", "json"]
if a.threads:
    cmd += ["-t", str(a.threads)]
results = []
if ints(a.p) or gens:
    print("bench_llamacpp: " + " ".join(cmd), file=sys.stderr, flush=True)
    results = json.loads(subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout)
kv_row = kv_row_bytes(a.model)
rows = []


def batched_rows():
    """llama-batched-bench's decode rows (its markdown table: PP, TG, B, N_KV, T_PP, S_PP, T_TG,
    S_TG, T, S), one run a repetition after one to warm up."""
    many = [b for b in batches if b > 1]
    if not many or not ints(a.n):
        return []
    exe = a.llama_batched_bench or os.path.join(os.path.dirname(a.llama_bench), "llama-batched-bench")
    depths = sorted({max(d, 1) for d in ints(a.d)})
    ctx = max(many) * (max(depths) + max(ints(a.n))) + 16
    base = [exe, "-m", a.model, "-c", str(ctx), "-b", "2048", "-ub", "512", "-ngl", str(a.ngl),
            "-npp", ",".join(map(str, depths)), "-ntg", ",".join(map(str, ints(a.n))), "-npl", ",".join(map(str, many))]
    if a.threads:
        base += ["-t", str(a.threads)]
    samples = {}
    for rep in range(a.r + 1):
        out = None
        for fa in ([] if a.no_fa else [["-fa", "on"], ["-fa"]]) or [[]]:  # the flag's form changed across releases
            cmd = base + fa
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            if p.returncode == 0:
                out = p.stdout + "\n" + p.stderr  # (its table goes through its log: either stream)
                break
        if out is None:
            raise SystemExit("bench_llamacpp: " + " ".join(cmd) + " failed:\n" + p.stderr[-2000:])
        if rep == 0:
            print("bench_llamacpp: " + " ".join(cmd), file=sys.stderr, flush=True)
            continue
        for line in out.splitlines():
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) != 10 or not cells[0].isdigit():
                continue
            pp, tg, b = int(cells[0]), int(cells[1]), int(cells[2])
            samples.setdefault((pp, tg, b), []).append(float(cells[7]))
    out_rows = []
    for (pp, tg, b), ts in samples.items():
        d = pp if pp in ints(a.d) else 0  # a depth of 0 ran with a one-token prompt, as tl-bench's does
        row = dict(model=a.name or os.path.basename(a.model).rsplit(".", 1)[0], engine="llama.cpp", device="",
                   test=f"tg{tg}" + (f"@d{d}" if d else "") + f"x{b}", n_prompt=0, n_gen=tg, n_depth=d, n_batch=b,
                   reps=len(ts), avg_ts=statistics.mean(ts), stddev_ts=statistics.stdev(ts) if len(ts) > 1 else 0.0,
                   samples_ts=ts)
        out_rows.append(row)
    return out_rows


for x in results:
    p, n, d = x.get("n_prompt", 0), x.get("n_gen", 0), x.get("n_depth", 0)
    if not p and not n:
        continue
    samples = x.get("samples_ts", [])[1:]
    if samples:
        x["avg_ts"], x["stddev_ts"] = statistics.mean(samples), statistics.stdev(samples) if len(samples) > 1 else 0.0
    test = (f"pp{p}" if p else f"tg{n}") + (f"@d{d}" if d else "")
    backend = x.get("backends") or x.get("backend", "")
    quant = x.get("model_type", "").split(" ")[-1]
    engine = f"llama.cpp {x.get('build_commit', '')} {backend} {quant} {'-fa 1' if not a.no_fa else ''}".strip()
    if a.ngl == 0 or backend.upper() == "CPU":
        engine += f" -t {x.get('n_threads')}"
    row = dict(model=a.name or os.path.basename(a.model).rsplit(".", 1)[0], engine=engine,
               device=x.get("gpu_info") or x.get("cpu_info", ""), test=test, n_prompt=p, n_gen=n, n_depth=d,
               reps=len(samples), avg_ts=x["avg_ts"], stddev_ts=x["stddev_ts"],
               samples_ts=samples, weight_bytes=x.get("model_size", 0))
    if kv_row is not None:
        w = x.get("model_size", 0)
        row["bytes_per_token"] = peer_rows.bytes_per_token(lambda tokens: w, kv_row, p, n, d)
    rows.append(row)
for row in batched_rows():
    if rows:  # llama-bench's rows name the build, backend, quantization and device
        row["engine"], row["device"], row["weight_bytes"] = rows[0]["engine"], rows[0]["device"], rows[0]["weight_bytes"]
        if kv_row is not None:
            w = rows[0]["weight_bytes"]
            row["bytes_per_token"] = peer_rows.bytes_per_token(lambda tokens: w, kv_row, 0, row["n_gen"], row["n_depth"], row["n_batch"])
    rows.append(row)
peer_rows.print_rows(rows, a.o)
