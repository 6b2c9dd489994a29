// The in-place KV cache (Transformer-Lite 2.3): tl-plan finds each cache input and the
// graph output that appends the new tokens to it (Concat(past, new) along the sequence
// axis: a plain Concat, tl-fuse's tl.Concat pair, or a tl.RoPE with cache_axis), proves
// the appended cache is read only by tl.Attention, and makes the pair one buffer of
// --max-seq tokens: the Concats become tl.KvAppend, which writes only the new tokens, at
// the cache's length; attention reads the cache's first tokens in place; nothing moves
// the cache between steps. With --pad, decode steps bind the cache length in buckets
// (padding keys hidden by the causal mask at the cache's true length), so a step's shapes
// and kernel arguments change only when the length crosses a bucket.
//
// It does not allocate anything: tl-run does, from the metadata (docs/artifacts.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "onnx/model_io.h"
#include "plan/kv_type.h"
#include "shape/shape_inference.h"

namespace tl {

enum class KvLayout { Heads, Sequence };  // [B, H, T, D] as exported; [T, B, H, D] (the paper's)

struct KvPair {
  std::string past, present;
};

struct KvPlan {
  std::vector<KvPair> pairs;
  std::string length;        // the symbol of the cache inputs' length ("past")
  std::string notInPlace;    // why the caches stay as exported ("" when in place or there are none)
  KvLayout layout = KvLayout::Sequence;
  int64_t pad = 1;           // decode lengths in buckets of pad tokens (1: exact)
  std::vector<std::string> keyMasks;  // inputs padded with zeros to a bucket (tl.Attention's key_mask)
  int appends = 0;           // Concats rewritten into tl.KvAppend
  int ropesInAttention = 0;  // tl.RoPEs marked in_attention (their attention does them at decode)
  KvType type = KvType::F32;
  std::string typeWhy;       // why the default f16 was not taken ("" where it was, or --kv-type chose)
};

// Finds the caches and, when every one can live in place, rewrites their Concats into
// tl.KvAppend (model changes; re-run the shape analysis after). Throws tl::Error (bad
// input) for a cache input with no appending output, and for --pad that the graph does
// not allow (the caches not in place, an attention over them that is not causal, a node
// that reads the cache length as a value). `type`: the caches' element; by default f16
// where the caches are in place and every tl.Attention reads its k and v from them (one
// model's attention kernels are built for one element type), else f32. A type given for
// a model without caches, f16 or q8 where the default could not take f16, or q8 for a
// head size that is no multiple of 32, throws (bad input).
KvPlan planKvCache(Model& model, KvLayout layout, int64_t pad, std::optional<KvType> type = std::nullopt);

// The --emit text lines, and the metadata (tl.plan.kv*).
std::string renderKvPlan(const KvPlan& plan, int64_t maxSeq);
void annotateKvPlan(onnx::ModelProto& proto, const KvPlan& plan);

}  // namespace tl
