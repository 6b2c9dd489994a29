"""What tl-bench's peer scripts share (bench_torch.py, bench_llamacpp.py): its bytes per
token and the printing of their rows (jsonl for tl-bench --peer, else a short table)."""
import json


def bytes_per_token(weights, kv_row, prompt, gen, depth, batch=1):
    """tl-bench's definition (docs/tl-bench.md). weights(tokens): the weight bytes a step of
    that many tokens reads; kv_row: one token's K and V over all layers. A prefill token: the
    weights once, the cache read and the new rows written, over the prompt; a decode token:
    the weights (read once for a batch's `batch` sequences), the cache read at the test's mean
    length, the new row written."""
    if prompt:
        return (weights(prompt) + kv_row * (depth + 2 * prompt)) / prompt
    return weights(1) / batch + kv_row * (max(depth, 1) + (gen - 1) / 2 + 2)


def print_rows(rows, fmt):
    if fmt == "jsonl":
        for r in rows:
            print(json.dumps(r))
        return
    print("| model | engine | test | t/s |\n| :--- | :--- | :--- | ---: |")
    for r in rows:
        print(f"| {r['model']} | {r['engine']} | {r['test']} | {r['avg_ts']:.2f} ± {r['stddev_ts']:.2f} |")
