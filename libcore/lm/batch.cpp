#include "lm/batch.h"

#include <algorithm>

#include "cli/error.h"

namespace tl {

BatchDecoder::BatchDecoder(Executor& ex, CausalLm& lm) : ex_(ex), lm_(lm) {
  if (!lm.canRewind())
    throw Error("batched decoding needs tl-plan's in-place KV caches (run the model through tl-plan --batch N)");
  if (!lm.hasMask() || !lm.hasPositions())
    throw Error(std::string("batched decoding needs the model's input '") + (lm.hasMask() ? "position_ids" : "attention_mask") +
                "': each sequence in a batch has its own mask and positions");
  rows_ = ex.cacheBatch();
}

int64_t BatchDecoder::length(int64_t id) const {
  auto it = length_.find(id);
  if (it == length_.end()) throw Error("no sequence " + std::to_string(id) + " in the batch");
  return it->second;
}

int64_t BatchDecoder::row(int64_t id) const {
  const auto at = std::find(order_.begin(), order_.end(), id);
  if (at == order_.end()) throw Error("no sequence " + std::to_string(id) + " in the batch");
  return at - order_.begin();
}

int64_t BatchDecoder::join(const std::function<void()>& prefill) {
  if (active() == rows_)
    throw Error("the batch is full: " + std::to_string(rows_) + " sequences (tl-plan --batch sets how many)");
  if (!order_.empty()) {  // row 0's sequence moves to the first free row
    ex_.copyCacheRow(0, active(), length_.at(order_[0]));
    order_.push_back(order_[0]);
  } else {
    order_.push_back(0);
  }
  const int64_t id = next_++;
  order_[0] = id;
  length_[id] = 0;
  try {
    prefill();
  } catch (...) {
    leave(id);
    throw;
  }
  length_[id] = ex_.cacheRows().at(0);
  return id;
}

int64_t BatchDecoder::join(const std::vector<int64_t>& prompt, std::vector<float>* logits) {
  return join([&] {
    lm_.reset();
    std::vector<float> out = lm_.step(prompt);
    if (logits) *logits = std::move(out);
  });
}

void BatchDecoder::leave(int64_t id) {
  const int64_t row = this->row(id), last = active() - 1;
  if (row != last) {  // the last row's sequence fills the gap
    ex_.copyCacheRow(last, row, length_.at(order_[static_cast<size_t>(last)]));
    order_[static_cast<size_t>(row)] = order_[static_cast<size_t>(last)];
  }
  order_.pop_back();
  length_.erase(id);
}

std::vector<int64_t> BatchDecoder::rowTokens(const std::map<int64_t, int64_t>& next) const {
  if (order_.empty()) throw Error("no sequence in the batch to step");
  if (next.size() != order_.size()) throw Error("a batched step takes a token for every sequence in the batch");
  std::vector<int64_t> ids;
  for (int64_t id : order_) {
    auto t = next.find(id);
    if (t == next.end()) throw Error("a batched step takes a token for every sequence in the batch (none for " + std::to_string(id) + ")");
    if (t->second < 0 || t->second >= lm_.vocab())
      throw Error("token " + std::to_string(t->second) + " is outside the vocabulary of " + std::to_string(lm_.vocab()));
    ids.push_back(t->second);
  }
  return ids;
}

int64_t BatchDecoder::enqueueStep(const std::vector<int64_t>& ids) {
  const int64_t n = active();
  std::vector<int64_t> lens;  // (a row's new token sits at its length: lens are its position ids too)
  int64_t longest = 0;
  for (int64_t id : order_) {
    const int64_t len = length_.at(id);
    if (len + 1 > ex_.cacheCapacity())
      throw Error("sequence " + std::to_string(id) + " holds " + std::to_string(len) + " tokens, the caches' capacity (tl-plan --max-seq)");
    lens.push_back(len);
    longest = std::max(longest, len);
  }
  // Row b's keys: its own len + 1; the rest of the longest row's length is padding.
  std::vector<int64_t> mask(static_cast<size_t>(n * (longest + 1)), 0);
  for (int64_t b = 0; b < n; ++b)
    std::fill_n(mask.begin() + b * (longest + 1), lens[static_cast<size_t>(b)] + 1, 1);
  std::vector<Tensor> inputs{makeTensor("input_ids", DType::Int64, {n, 1}, ids.data()),
                             makeTensor("attention_mask", DType::Int64, {n, longest + 1}, mask.data()),
                             makeTensor("position_ids", DType::Int64, {n, 1}, lens.data())};
  std::vector<Executor::Carry> carried;
  for (size_t i = 0; i < lm_.cacheInputs().size(); ++i) carried.push_back({lm_.cacheInputs()[i], lm_.cacheOutputs()[i]});
  ex_.setCacheRows(lens);
  ex_.keepLastRows("logits", 0);
  ex_.enqueue(inputs, carried);
  for (int64_t id : order_) ++length_[id];
  return n;
}

std::map<int64_t, std::vector<float>> BatchDecoder::step(const std::map<int64_t, int64_t>& next) {
  const int64_t n = enqueueStep(rowTokens(next));
  const std::vector<float> logits = ex_.readFloats("logits", 0, n * lm_.vocab());
  std::map<int64_t, std::vector<float>> out;
  for (int64_t b = 0; b < n; ++b) {
    auto from = logits.begin() + b * lm_.vocab();
    out[order_[static_cast<size_t>(b)]].assign(from, from + lm_.vocab());
  }
  return out;
}

std::map<int64_t, std::vector<int64_t>> BatchDecoder::generateGreedy(const std::map<int64_t, int64_t>& next, int64_t n) {
  std::vector<int64_t> ids = rowTokens(next);
  const int64_t rows = active();
  std::map<int64_t, std::vector<int64_t>> out;
  auto collect = [&](const std::vector<int64_t>& tokens) {
    for (int64_t b = 0; b < rows; ++b) out[order_[static_cast<size_t>(b)]].push_back(tokens[static_cast<size_t>(b)]);
  };
  for (int64_t i = 0; i < n; ++i) {
    if (i > 0) {
      ex_.feedToken("input_ids", static_cast<int>((i - 1) % 2));
      std::fill(ids.begin(), ids.end(), 0);  // placeholders: the device puts step i - 1's tokens there
    }
    enqueueStep(ids);
    ex_.argmaxToSlot("logits", 0, lm_.vocab(), static_cast<int>(i % 2), rows);
    if (i > 0) collect(ex_.tokensAt(static_cast<int>((i - 1) % 2)));
  }
  if (n > 0) collect(ex_.tokensAt(static_cast<int>((n - 1) % 2)));
  return out;
}

}  // namespace tl
