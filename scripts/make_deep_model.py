#!/usr/bin/env python3
"""Builds a deep test graph by repeating the last decoder layer of a shared model.

usage: make_deep_model.py MODEL.onnx LAYERS OUT.onnx
The copies share the last layer's weights (they need not be real: this graph exists to
time graph tools), get their own past_key_values.K.* inputs and present.K.* outputs,
and are chained through the residual stream. Needs Debian's python3-onnx.
"""
import re
import sys

import onnx


def main():
    src, layers, dst = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    m = onnx.load(src)
    g = m.graph
    layer_of = lambda name: int(re.search(r"layers\.(\d+)", name).group(1)) if re.search(r"layers\.(\d+)", name) else None
    nodes = list(g.node)
    have = 1 + max(l for l in (layer_of(n.name) for n in nodes) if l is not None)
    last = have - 1
    last_nodes = [n for n in nodes if layer_of(n.name) == last]
    prev_nodes = {o for n in nodes if layer_of(n.name) == last - 1 for o in n.output}
    last_outputs = {o for n in last_nodes for o in n.output}
    # The residual stream leaving the last layer, as consumed after it (final norm).
    after = [n for n in nodes if layer_of(n.name) is None and any(i in last_outputs for i in n.input)]
    new_nodes = []

    def copy_name(x, k):
        if x.startswith(f"present.{last}."):
            return x.replace(f"present.{last}.", f"present.{k}.")
        return x + f"__copy{k}"

    for k in range(have, layers):
        for n in last_nodes:
            c = onnx.NodeProto()
            c.CopyFrom(n)
            c.name = n.name.replace(f"layers.{last}", f"layers.{k}") + f"__copy{k}"
            for i, x in enumerate(c.input):
                if x in last_outputs:
                    c.input[i] = copy_name(x, k)
                elif x in prev_nodes:  # from the layer before: the previous copy's twin
                    twin = x.replace(f"layers.{last - 1}", f"layers.{last}")
                    c.input[i] = copy_name(twin, k - 1) if k > have else twin
                elif x.startswith(f"past_key_values.{last}."):
                    c.input[i] = x.replace(f"past_key_values.{last}.", f"past_key_values.{k}.")
            for i, x in enumerate(c.output):
                c.output[i] = copy_name(x, k)
            new_nodes.append(c)
        for vs, prefix in ((g.input, "past_key_values"), (g.output, "present")):
            for v in [v for v in vs if v.name.startswith(f"{prefix}.{last}.")]:
                w = onnx.ValueInfoProto()
                w.CopyFrom(v)
                w.name = v.name.replace(f"{prefix}.{last}.", f"{prefix}.{k}.")
                vs.append(w)
    suffix = f"__copy{layers - 1}"
    for n in after:
        for i, x in enumerate(n.input):
            if x in last_outputs and not x.startswith("present."):
                n.input[i] = x + suffix if layers > have else x
    # Keep topological order: copies go right after the last original layer node.
    idx = max(i for i, n in enumerate(nodes) if layer_of(n.name) == last) + 1
    g.ClearField("node")
    g.node.extend(nodes[:idx] + new_nodes + nodes[idx:])
    g.ClearField("value_info")
    onnx.save(m, dst)
    print(f"{dst}: {layers} layers, {len(g.node)} nodes", file=sys.stderr)


main()
