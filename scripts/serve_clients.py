#!/usr/bin/env python3
"""Issue 31's service row: N callers of a running tl-ctxswap serve at once, against one alone.

    scripts/serve_clients.py SOCKET [--clients 8] [--tokens 200] [--rounds 3] [--prompt TEXT]

Each round makes fresh contexts (`new`, before the clock starts), then times one call alone
and then N calls sent together, each on its own connection, from the first request line sent
to the last `done` line read. The callers are sockets of this one process, so the time is
the service's, not N client processes starting up (scripts/serve_bench.sh times the
tl-ctxswap call clients themselves). Every reply must equal the lone call's reply (same
system prompt and prompt: greedy, byte for byte); the service's peak KV bytes are checked
against its budget (the stats verb). Prints a line a round.
"""
import argparse
import json
import selectors
import socket
import sys
import time


def ask(path, request):
    """One request's reply lines (parsed)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    s.sendall((json.dumps(request) + "\n").encode())
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    return [json.loads(l) for l in data.decode().splitlines() if l]


def calls(path, ids, prompt, n):
    """The calls on contexts `ids` sent together: (seconds to the last done, each reply's tokens)."""
    sel = selectors.DefaultSelector()
    socks = {}
    for i in ids:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        socks[i] = s
    lines = [(i, (json.dumps({"verb": "call", "id": i, "prompt": prompt, "n": n}) + "\n").encode()) for i in ids]
    pending, replies = {}, {i: [] for i in ids}
    t0 = time.perf_counter()
    for i, line in lines:
        socks[i].sendall(line)
        sel.register(socks[i], selectors.EVENT_READ, i)
        pending[i] = b""
    open_ = set(ids)
    while open_:
        for key, _ in sel.select():
            i = key.data
            chunk = key.fileobj.recv(65536)
            if not chunk:
                sel.unregister(key.fileobj)
                key.fileobj.close()
                open_.discard(i)
                continue
            pending[i] += chunk
            *whole, pending[i] = pending[i].split(b"\n")
            for l in whole:
                m = json.loads(l)
                if "error" in m:
                    sys.exit(f"serve_clients: call on context {i}: {m['error']}")
                if "token" in m:
                    replies[i].append(m["token"])
    return time.perf_counter() - t0, replies


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("socket")
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--tokens", type=int, default=200)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--prompt", default="def parse(line):")
    p.add_argument("--system", default="# tools")
    a = p.parse_args()

    def fresh(k):
        return [ask(a.socket, {"verb": "new", "system": a.system})[0]["id"] for _ in range(k)]

    _, alone = calls(a.socket, fresh(1), a.prompt, a.tokens)  # warm-up, and the reply every call must give
    alone = next(iter(alone.values()))
    calls(a.socket, fresh(a.clients), a.prompt, a.tokens)  # warm-up: the N-row steps' kernels
    for _ in range(a.rounds):
        one, r1 = calls(a.socket, fresh(1), a.prompt, a.tokens)
        many, rn = calls(a.socket, fresh(a.clients), a.prompt, a.tokens)
        if any(r != alone for r in list(r1.values()) + list(rn.values())):
            sys.exit("serve_clients: a reply differs from the lone call's")
        stats = ask(a.socket, {"verb": "stats"})[0]
        if stats["peak"] > stats["budget"]:
            sys.exit(f"serve_clients: peak KV {stats['peak']} over the budget {stats['budget']}")
        t1, tn = a.tokens / one, a.clients * a.tokens / many
        print(f"one client {t1:.0f} tok/s, {a.clients} clients {tn:.0f} tok/s, {tn / t1:.2f}x; "
              f"peak KV {stats['peak']} of {stats['budget']} bytes", flush=True)


if __name__ == "__main__":
    main()
