#include "lm/causal_lm.h"

#include <cstring>
#include <set>

#include "cli/error.h"

namespace tl {
namespace {

Tensor int64Tensor(const std::string& name, std::vector<int64_t> dims, const std::vector<int64_t>& values) {
  return makeTensor(name, DType::Int64, std::move(dims), values.data());
}

// Whether `tensor` is computed from positions (position_ids, or a Range) and not from
// token ids: the indices of a position-embedding lookup.
bool fromPositions(const Graph& g, const std::string& tensor) {
  std::vector<std::string> todo{tensor};
  std::set<std::string> seen;
  bool positions = false;
  while (!todo.empty()) {
    std::string t = todo.back();
    todo.pop_back();
    if (!seen.insert(t).second) continue;
    if (t == "input_ids") return false;
    if (t == "position_ids") positions = true;
    int p = g.producer(t);
    if (p < 0) continue;
    const auto& n = g.node(static_cast<size_t>(p));
    if (n.op_type() == "Range") positions = true;
    if (n.op_type() == "Shape" || n.op_type() == "Size") continue;  // reads a shape, not token values
    for (const auto& in : n.input())
      if (!in.empty()) todo.push_back(in);
  }
  return positions;
}

}  // namespace

std::vector<int64_t> byteTokens(const std::string& bytes) {
  std::vector<int64_t> out;
  out.reserve(bytes.size());
  for (unsigned char c : bytes) out.push_back(c);
  return out;
}

int64_t positionTableRows(const Graph& graph) {
  int64_t limit = 0;
  for (size_t i = 0; i < graph.nodeCount(); ++i) {
    const auto& n = graph.node(i);
    if (n.op_type() != "Gather" || n.input_size() < 2 || !graph.initializer(n.input(0))) continue;
    if (!fromPositions(graph, n.input(1))) continue;
    const int64_t rows = graph.initializer(n.input(0))->dims(0);
    limit = limit ? std::min(limit, rows) : rows;
  }
  return limit;
}

CausalLm::CausalLm(Executor& executor, const Graph& graph, const ShapeAnalysis& analysis) : ex_(executor) {
  bool ids = false;
  for (const auto& in : graph.proto().input()) {
    const std::string& n = in.name();
    if (analysis.at(n).cls != TensorClass::Input) continue;
    if (n == "input_ids") {
      ids = true;
    } else if (n == "attention_mask") {
      hasMask_ = true;
    } else if (n == "position_ids") {
      hasPositions_ = true;
    } else if (n.rfind("past_key_values.", 0) == 0) {
      std::string out = "present." + n.substr(std::strlen("past_key_values."));
      if (!analysis.tensors.count(out)) throw Error("cache input '" + n + "' has no matching output '" + out + "'");
      const auto& dims = analysis.at(n).dims;
      if (dims.size() != 4 || !dims[1].isConst() || !dims[3].isConst())
        throw Error("cache input '" + n + "' is not [batch, heads, past, head_dim] " + str(dims));
      kvInputs_.push_back(n);
      kvOutputs_.push_back(out);
      kvEmpty_.push_back({1, *dims[1].constValue(), 0, *dims[3].constValue()});
    } else {
      throw Error("input '" + n + "' is not one a causal language model takes (input_ids, attention_mask, "
                  "position_ids, past_key_values.*)");
    }
  }
  if (!ids) throw Error("the model has no input 'input_ids'");
  if (!analysis.tensors.count("logits")) throw Error("the model has no output 'logits'");
  const auto& ld = analysis.at("logits").dims;
  if (ld.empty() || !ld.back().isConst()) throw Error("the vocabulary size (last dim of logits) is not constant");
  vocab_ = *ld.back().constValue();
  positionLimit_ = positionTableRows(graph);
}

void CausalLm::reset() {
  length_ = 0;
  history_.clear();
}

bool CausalLm::canRewind() const { return hasCache() && ex_.cacheStrides(kvInputs_[0]) != nullptr; }

void CausalLm::rewind(int64_t length) {
  if (!canRewind())
    throw Error("going back over consumed tokens needs tl-plan's in-place KV caches (run the model through tl-plan)");
  if (length < 0 || length > length_)
    throw Error("cannot go back to " + std::to_string(length) + " tokens: " + std::to_string(length_) + " consumed");
  ex_.rewindCaches(length);
  length_ = length;
}

void CausalLm::adopt(int64_t length) {
  if (!canRewind()) throw Error("taking over cache rows needs tl-plan's in-place KV caches (run the model through tl-plan)");
  if (length < 0 || length > ex_.cacheCapacity())
    throw Error("cannot take " + std::to_string(length) + " tokens: the caches hold " + std::to_string(ex_.cacheCapacity()));
  length_ = length;
}

int64_t CausalLm::decodeRows() const { return ex_.decodeRows(); }

int64_t CausalLm::capacity() const {
  const int64_t cache = ex_.cacheCapacity();
  if (!cache || !positionLimit_) return std::max(cache, positionLimit_);
  return std::min(cache, positionLimit_);
}

std::vector<std::pair<std::string, std::vector<int64_t>>> CausalLm::inputShapes(int64_t tokens, int64_t past) const {
  const int64_t n = hasCache() ? tokens : past + tokens;
  if (!hasCache()) past = 0;
  std::vector<std::pair<std::string, std::vector<int64_t>>> out{{"input_ids", {1, n}}};
  if (hasMask_) out.push_back({"attention_mask", {1, past + n}});
  if (hasPositions_) out.push_back({"position_ids", {1, n}});
  for (size_t i = 0; i < kvInputs_.size(); ++i) {
    auto dims = kvEmpty_[i];
    dims[2] = past;
    out.push_back({kvInputs_[i], dims});
  }
  return out;
}

int64_t CausalLm::enqueueStep(const std::vector<int64_t>& tokens, int64_t rows) {
  if (tokens.empty()) throw Error("no tokens to feed");
  ex_.keepLastRows("logits", rows);
  for (auto t : tokens)
    if (t < 0 || t >= vocab_) throw Error("token " + std::to_string(t) + " is outside the vocabulary of " + std::to_string(vocab_));
  std::vector<int64_t> feed = tokens;
  int64_t past = length_;
  if (!hasCache()) {
    history_.insert(history_.end(), tokens.begin(), tokens.end());
    feed = history_;
    past = 0;
  }
  const int64_t n = static_cast<int64_t>(feed.size());
  std::vector<Tensor> inputs;
  std::vector<Executor::Carry> carried;
  size_t cache = 0;  // inputShapes lists the cache inputs last, in order
  for (auto& [name, dims] : inputShapes(static_cast<int64_t>(tokens.size()), length_)) {
    if (name == "input_ids") {
      inputs.push_back(int64Tensor(name, dims, feed));
    } else if (name == "attention_mask") {
      inputs.push_back(int64Tensor(name, dims, std::vector<int64_t>(past + n, 1)));
    } else if (name == "position_ids") {
      std::vector<int64_t> pos(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) pos[i] = past + i;
      inputs.push_back(int64Tensor(name, dims, pos));
    } else if (past == 0) {  // an empty cache
      Tensor empty;
      empty.name = name;
      empty.dtype = DType::Float;
      empty.dims = dims;
      inputs.push_back(std::move(empty));
      ++cache;
    } else {
      carried.push_back({name, kvOutputs_[cache++]});
    }
  }
  ex_.enqueue(inputs, carried);
  length_ += static_cast<int64_t>(tokens.size());
  return n;
}

std::vector<float> CausalLm::step(const std::vector<int64_t>& tokens, bool allPositions) {
  const int64_t rows = static_cast<int64_t>(tokens.size());
  const int64_t n = enqueueStep(tokens, allPositions ? rows : 1);
  if (allPositions) return ex_.readFloats("logits", (n - rows) * vocab_, rows * vocab_);
  return ex_.readFloats("logits", (n - 1) * vocab_, vocab_);
}

int64_t CausalLm::stepGreedy(const std::vector<int64_t>& tokens) {
  const int64_t n = enqueueStep(tokens, 1);
  return ex_.argmax("logits", (n - 1) * vocab_, vocab_);
}

std::vector<int64_t> CausalLm::generateGreedy(int64_t first, int64_t n) {
  std::vector<int64_t> out;
  if (!hasCache() || ex_.device().profiling()) {
    for (int64_t i = 0; i < n; ++i) out.push_back(first = stepGreedy({first}));
    return out;
  }
  for (int64_t i = 0; i < n; ++i) {
    if (i == 0) {
      enqueueStep({first}, 1);
    } else {
      ex_.feedToken("input_ids", static_cast<int>((i - 1) % 2));
      enqueueStep({0}, 1);  // a placeholder: the device puts step i - 1's token there
    }
    ex_.argmaxToSlot("logits", 0, vocab_, static_cast<int>(i % 2));
    if (i > 0) out.push_back(ex_.tokensAt(static_cast<int>((i - 1) % 2)).front());
  }
  if (n > 0) out.push_back(ex_.tokensAt(static_cast<int>((n - 1) % 2)).front());
  return out;
}

}  // namespace tl
