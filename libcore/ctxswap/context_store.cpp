#include "ctxswap/context_store.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <future>
#include <optional>
#include <thread>

#include "cli/error.h"
#include "ctxswap/chunk_file.h"
#include "ctxswap/context_log.h"
#include "ctxswap/load_plan.h"
#include "ctxswap/recompute.h"
#include "ctxswap/tolerance.h"

namespace tl {

namespace {

void appendRows(ContextKv& kv, const ContextKv& rows) { appendChunk(kv, chunkValues(rows, 0, rows.tokens), rows.tokens); }

// Row `row` of a run's last `count` rows of logits ([1, rows, vocab]).
std::vector<float> rowLogits(const Tensor& logits, int64_t row, int64_t count, int64_t vocab) {
  const float* p = reinterpret_cast<const float*>(logits.bytes.data()) + (elementCount(logits.dims) - (count - row) * vocab);
  return {p, p + vocab};
}

// A run's first `rows` rows: its caches' and its attention probabilities' ([1, H, rows,
// keys]); the logits are left out.
ContextRun firstRows(const ContextRun& run, int64_t rows) {
  ContextRun out;
  out.rows.heads = run.rows.heads;
  out.rows.size = run.rows.size;
  out.rows.caches.resize(run.rows.caches.size());
  appendChunk(out.rows, chunkValues(run.rows, 0, rows), rows);
  out.wanted.emplace_back();
  for (size_t l = 1; l < run.wanted.size(); ++l) {
    const Tensor& t = run.wanted[l];
    const int64_t H = t.dims[1], R = t.dims[2], keys = t.dims[3];
    Tensor cut = t;
    cut.dims[2] = rows;
    cut.bytes.resize(static_cast<size_t>(H * rows * keys) * sizeof(float));
    for (int64_t h = 0; h < H; ++h)
      std::memcpy(cut.bytes.data() + static_cast<size_t>(h * rows * keys) * sizeof(float),
                  t.bytes.data() + static_cast<size_t>(h * R * keys) * sizeof(float), static_cast<size_t>(rows * keys) * sizeof(float));
    out.wanted.push_back(std::move(cut));
  }
  return out;
}

}  // namespace

Policy parsePolicy(const std::string& name) {
  for (Policy p : {Policy::Llms, Policy::VllmS, Policy::VllmSq, Policy::Swap, Policy::Lmk})
    if (name == policyName(p)) return p;
  throw Error("unknown policy '" + name + "' (llms, vllm-s, vllm-sq, swap, lmk)", ExitCode::Usage);
}

const char* policyName(Policy p) {
  switch (p) {
    case Policy::Llms: return "llms";
    case Policy::VllmS: return "vllm-s";
    case Policy::VllmSq: return "vllm-sq";
    case Policy::Swap: return "swap";
    case Policy::Lmk: return "lmk";
  }
  return "?";
}

ContextStore::ContextStore(Executor& ex, CausalLm& lm, uint64_t modelFingerprint, StoreOptions opt)
    : ex_(ex), lm_(lm), model_(modelFingerprint), opt_(std::move(opt)), memory_(opt_.budget) {
  emptyContextKv(lm_);  // throws for a model without caches
  if (opt_.chunk < 1) throw Error("--chunk must be at least 1 token", ExitCode::Usage);
  if (opt_.policy == Policy::Llms) {
    probs_ = attentionProbabilities(ex_);
    if (probs_.empty())
      throw Error("the llms policy ranks chunks by the attention their keys draw: give the unfused model (its Softmax outputs)");
  }
  std::error_code ec;
  std::filesystem::create_directories(opt_.swapDir, ec);
  if (ec) throw Error(opt_.swapDir + ": cannot create the swap directory: " + ec.message());
  for (auto& r : recoverContexts(opt_.swapDir, model_, &notes_)) {
    Context c;
    c.owner = r.owner;
    c.tokens = std::move(r.tokens);
    c.chunks.resize(c.tokens.size() / static_cast<size_t>(opt_.chunk));
    for (size_t i = 0; i < c.chunks.size(); ++i) {
      Chunk& ch = c.chunks[i];
      ch.bits = storedBits();
      const std::string path = chunkFilePath(opt_.swapDir, r.id, static_cast<uint32_t>(i));
      ch.diskBytes = static_cast<size_t>(std::filesystem::file_size(path, ec));
      ch.onDisk = !ec;  // its header says the rest when it is read
    }
    next_ = std::max(next_, r.id + 1);
    contexts_[r.id] = std::move(c);
  }
}

// While one lives, durable writes go into one group, committed when the outermost ends.
class ContextStore::WriteGroup {
 public:
  explicit WriteGroup(ContextStore& s) : s_(s), outer_(!s.writes_) {
    if (outer_) s_.writes_ = std::make_unique<DurableWrites>();
  }
  ~WriteGroup() {
    if (outer_) s_.commitWrites();
  }
  WriteGroup(const WriteGroup&) = delete;
  WriteGroup& operator=(const WriteGroup&) = delete;

 private:
  ContextStore& s_;
  const bool outer_;  // (a group inside another commits with it)
};

int ContextStore::storedBits() const { return opt_.policy == Policy::Llms || opt_.policy == Policy::VllmSq ? 8 : 32; }

ContextStore::Context& ContextStore::owned(uint64_t id, const std::string& owner) {
  auto it = contexts_.find(id);
  if (it == contexts_.end()) throw Error("context " + std::to_string(id) + " does not exist (deleted, or never made)");
  if (it->second.owner != owner) throw Error("context " + std::to_string(id) + " belongs to another client");
  return it->second;
}

uint64_t ContextStore::create(const std::string& owner, const std::vector<int64_t>& system) {
  const auto mine = std::count_if(contexts_.begin(), contexts_.end(), [&](const auto& c) { return c.second.owner == owner; });
  if (mine >= opt_.maxContextsPerOwner)
    throw Error("this client has " + std::to_string(mine) + " contexts, the most it may hold: delete one first");
  if (static_cast<int64_t>(system.size()) > opt_.maxTokens)
    throw Error("a system prompt of " + std::to_string(system.size()) + " tokens, over the " + std::to_string(opt_.maxTokens) + " a context may hold");
  for (int64_t t : system)
    if (t < 0 || t >= lm_.vocab()) throw Error("token " + std::to_string(t) + " is outside the vocabulary");
  const uint64_t id = next_++;
  Context& c = contexts_[id];
  c.owner = owner;
  c.tokens = system;
  writeRecord(id, c);
  return id;
}

void ContextStore::remove(uint64_t id, const std::string& owner) {
  Context& c = owned(id, owner);
  for (const auto* calls : {&queued_, &running_})
    for (const Running& r : *calls)
      if (r.id == id) throw Error("context " + std::to_string(id) + " has a call under way");
  std::error_code ec;
  for (size_t i = 0; i < c.chunks.size(); ++i) {
    if (c.chunks[i].held) memory_.release({id, static_cast<uint32_t>(i)});
    std::filesystem::remove(chunkFilePath(opt_.swapDir, id, static_cast<uint32_t>(i)), ec);
  }
  std::filesystem::remove(contextLogPath(opt_.swapDir, id), ec);
  contexts_.erase(id);
}

void ContextStore::checkCall(const Context& c, const std::vector<int64_t>& prompt, int64_t generate) const {
  if (generate < 0) throw Error("-n must be at least 0", ExitCode::Usage);
  if (prompt.empty() && c.tokens.empty()) throw Error("a call on an empty context needs a prompt");
  for (int64_t t : prompt)
    if (t < 0 || t >= lm_.vocab()) throw Error("token " + std::to_string(t) + " is outside the vocabulary");
  const size_t total = c.tokens.size() + prompt.size() + static_cast<size_t>(generate);
  if (static_cast<int64_t>(total) > opt_.maxTokens)
    throw Error("the context would hold " + std::to_string(total) + " tokens, over the " + std::to_string(opt_.maxTokens) + " allowed");
}

CallResult ContextStore::call(uint64_t id, const std::string& owner, const std::vector<int64_t>& prompt, int64_t generate,
                              const std::function<void(int64_t)>& onToken, const SamplingOptions& sampling) {
  Context& c = owned(id, owner);
  checkCall(c, prompt, generate);
  memory_.lock(id);
  struct Unlock {
    ChunkMemory& m;
    uint64_t id;
    ~Unlock() { m.unlock(id); }
  } unlock{memory_, id};

  CallResult r;
  const auto start = std::chrono::steady_clock::now();
  ContextKv past = ready(id, c, &r.load);
  r.load.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::vector<int64_t> all = c.tokens;
  all.insert(all.end(), prompt.begin(), prompt.end());
  std::vector<std::string> wanted = {"logits"};
  wanted.insert(wanted.end(), probs_.begin(), probs_.end());
  std::vector<double> mass = c.mass;
  int64_t heads = c.heads;
  Sampler sampler(sampling);
  sampler.prime(all);
  // A run's first `rows` rows join the context's, with the attention mass their keys drew.
  const auto absorb = [&](ContextRun& x, int64_t rows) {
    if (rows < x.rows.tokens) x = firstRows(x, rows);
    if (!probs_.empty()) heads = addKeyMass(x, 1, &mass);
    appendRows(past, x.rows);
  };
  const auto emit = [&](int64_t t) {
    r.reply.push_back(t);
    all.push_back(t);
    if (onToken) onToken(t);
  };
  // The rows after the last whole chunk, then the prompt's, in one run.
  ContextRun run = runContext(ex_, lm_, all, past.tokens, static_cast<int64_t>(all.size()) - past.tokens, past, wanted);
  absorb(run, run.rows.tokens);
  if (generate > 0) emit(sampler.sample(rowLogits(run.wanted[0], 0, 1, lm_.vocab())));
  if (lm_.canRewind() && probs_.empty() && generate > 1) {
    // In-place caches: the prefill left the context's rows in batch row 0, and the reply's
    // steps go on there as tl-run's do (speculative with a drafter); their rows come back
    // at the end.
    lm_.adopt(static_cast<int64_t>(all.size()) - 1);
    if (drafter_) {
      bool first = true;
      const SpeculativeStats st = generateSpeculative(lm_, *drafter_, sampler, std::vector<int64_t>(all.begin(), all.end() - 1),
                                                      all.back(), generate - static_cast<int64_t>(r.reply.size()) + 1, draftMax_,
                                                      [&](int64_t t) {
                                                        if (!first) emit(t);
                                                        first = false;
                                                        return true;
                                                      });
      r.drafted = st.drafted;
      r.accepted = st.accepted;
    } else {
      while (static_cast<int64_t>(r.reply.size()) < generate) emit(sampler.sample(lm_.step({all.back()})));
    }
    appendCacheRows(past, 0, lm_.length());
  }
  while (static_cast<int64_t>(r.reply.size()) < generate) {  // the caches given as data each step
    run = runContext(ex_, lm_, all, static_cast<int64_t>(all.size()) - 1, 1, past, wanted);
    absorb(run, 1);
    emit(sampler.sample(rowLogits(run.wanted[0], 0, 1, lm_.vocab())));
  }
  c.tokens = std::move(all);
  c.mass = std::move(mass);
  c.heads = heads;
  WriteGroup writes(*this);
  keep(id, c, past);
  writeRecord(id, c);
  return r;
}

void checkBatchable(const Executor& ex, const CausalLm& lm, Policy policy, int64_t maxBatch, bool speculative) {
  if (maxBatch < 1) throw Error("--max-batch " + std::to_string(maxBatch) + ": at least 1 call at a time");
  if (speculative)
    throw Error("--max-batch steps one token of each call; speculative decoding (--prompt-lookup, --draft) checks "
                "several of one call a step: give one or the other");
  if (!lm.canRewind() || ex.cacheBatch() < maxBatch)
    throw Error("--max-batch " + std::to_string(maxBatch) + " decodes calls together in tl-plan's in-place KV caches, a batch row each: " +
                (lm.canRewind() ? "the model's plan holds " + std::to_string(ex.cacheBatch()) : std::string("the model has none")) +
                " (tl-plan --batch " + std::to_string(maxBatch) + ")");
  if (policy == Policy::Llms)
    throw Error("--max-batch: the llms policy reads each call's attention probabilities step by step, one call at a time "
                "(--policy vllm-s, vllm-sq, swap or lmk batch)");
}

void checkSpeculative(const CausalLm& lm, Policy policy) {
  if (!lm.canRewind())
    throw Error("speculative calls need tl-plan's in-place KV caches, to go back over the drafts not taken (run the model "
                "through tl-plan)");
  if (policy == Policy::Llms)
    throw Error("speculative calls: the llms policy reads each step's attention probabilities, one token a step "
                "(--policy vllm-s, vllm-sq, swap or lmk)");
}

void ContextStore::enableBatch(int64_t maxBatch) {
  checkBatchable(ex_, lm_, opt_.policy, maxBatch, drafter_ != nullptr);
  batch_ = std::make_unique<BatchDecoder>(ex_, lm_);
  maxBatch_ = maxBatch;
}

void ContextStore::setDrafter(Drafter* drafter, int64_t draftMax) {
  if (batch_) throw Error("a store of batched calls takes no drafter (checkBatchable refuses the two together)");
  checkSpeculative(lm_, opt_.policy);
  checkDraftRows(lm_, draftMax);
  drafter_ = drafter;
  draftMax_ = draftMax;
}

uint64_t ContextStore::begin(uint64_t id, const std::string& owner, const std::vector<int64_t>& prompt, int64_t generate,
                             const SamplingOptions& sampling) {
  if (!batch_) throw Error("batched calls need ContextStore::enableBatch");
  checkCall(owned(id, owner), prompt, generate);
  (void)Sampler(sampling);  // refused here, not when the call is admitted
  Running r;
  r.call = nextCall_++;
  r.id = id;
  r.owner = owner;
  r.prompt = prompt;
  r.generate = generate;
  r.sampling = sampling;
  queued_.push_back(std::move(r));
  return queued_.back().call;
}

void ContextStore::admit(Running& r, std::vector<CallEvent>* events) {
  Context& c = owned(r.id, r.owner);
  checkCall(c, r.prompt, r.generate);  // (another call may have grown the context since begin)
  memory_.lock(r.id);
  r.locked = true;
  r.all = c.tokens;
  r.all.insert(r.all.end(), r.prompt.begin(), r.prompt.end());
  r.sampler = std::make_unique<Sampler>(r.sampling);
  r.sampler->prime(r.all);
  ContextRun run;
  r.seq = batch_->join([&] {
    // Batch row 0 is free now: the context made ready (a recomputed chunk runs there too),
    // then the rows after its last whole chunk and the prompt's in one run.
    const auto start = std::chrono::steady_clock::now();
    r.past = ready(r.id, c, &r.result.load);
    r.result.load.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    run = runContext(ex_, lm_, r.all, r.past.tokens, static_cast<int64_t>(r.all.size()) - r.past.tokens, r.past, {"logits"});
  });
  appendRows(r.past, run.rows);
  if (r.generate > 0) take(r, r.sampler->sample(rowLogits(run.wanted[0], 0, 1, lm_.vocab())), events);
}

void ContextStore::take(Running& r, int64_t token, std::vector<CallEvent>* events) {
  r.result.reply.push_back(token);
  r.all.push_back(token);
  CallEvent e;
  e.call = r.call;
  e.token = token;
  events->push_back(std::move(e));
}

void ContextStore::appendCacheRows(ContextKv& past, int64_t row, int64_t length) {
  const int64_t count = length - past.tokens;
  if (count <= 0) return;
  ContextKv fresh = emptyContextKv(lm_);
  fresh.tokens = count;
  for (size_t i = 0; i < fresh.caches.size(); ++i) fresh.caches[i] = ex_.readCacheRow(lm_.cacheInputs().at(i), row, past.tokens, count);
  appendRows(past, fresh);
}

void ContextStore::finish(Running& r) {
  // Its rows after `past`: those its batch row took for the reply's tokens it was fed.
  appendCacheRows(r.past, batch_->row(r.seq), batch_->length(r.seq));
  batch_->leave(r.seq);
  r.seq = 0;
  Context& c = contexts_.at(r.id);
  c.tokens = std::move(r.all);
  WriteGroup writes(*this);
  keep(r.id, c, r.past);
  writeRecord(r.id, c);
  memory_.unlock(r.id);
  r.locked = false;
}

void ContextStore::drop(Running& r) {
  if (r.seq) {
    try {
      batch_->leave(r.seq);
    } catch (const std::exception&) {  // (a device that failed the step fails this too: the batch is dropped whole)
    }
    r.seq = 0;
  }
  if (r.locked) memory_.unlock(r.id);
  r.locked = false;
}

std::vector<ContextStore::CallEvent> ContextStore::advance() {
  std::vector<CallEvent> events;
  auto ended = [&](Running& r, const std::string& error) {
    CallEvent e;
    e.call = r.call;
    e.done = true;
    e.error = error;
    if (error.empty()) e.result = r.result;
    events.push_back(std::move(e));
  };
  for (auto it = queued_.begin(); it != queued_.end() && static_cast<int64_t>(running_.size()) < maxBatch_;) {
    const uint64_t id = it->id;
    if (std::any_of(running_.begin(), running_.end(), [&](const Running& r) { return r.id == id; })) {
      ++it;  // its context's call before it runs first
      continue;
    }
    Running r = std::move(*it);
    it = queued_.erase(it);
    try {
      admit(r, &events);
      if (static_cast<int64_t>(r.result.reply.size()) < r.generate) {
        running_.push_back(std::move(r));
        continue;
      }
      finish(r);
      ended(r, "");
    } catch (const std::exception& e) {
      drop(r);
      ended(r, e.what());
    }
  }
  if (running_.empty()) return events;
  std::map<int64_t, int64_t> next;
  for (const Running& r : running_) next[r.seq] = r.all.back();
  std::map<int64_t, std::vector<float>> logits;
  try {
    logits = batch_->step(next);
  } catch (const std::exception& e) {  // every running call ends with it; their contexts stay as they were
    for (Running& r : running_) {
      drop(r);
      ended(r, e.what());
    }
    running_.clear();
    return events;
  }
  std::optional<WriteGroup> writes;  // the calls that end here keep their rows in one commit, before their replies
  for (auto it = running_.begin(); it != running_.end();) {
    take(*it, it->sampler->sample(logits.at(it->seq)), &events);
    if (static_cast<int64_t>(it->result.reply.size()) < it->generate) {
      ++it;
      continue;
    }
    if (!writes) writes.emplace(*this);  // (opened at the first end: a step that ends none allocates nothing)
    try {
      finish(*it);
      ended(*it, "");
    } catch (const std::exception& e) {
      drop(*it);
      ended(*it, e.what());
    }
    it = running_.erase(it);
  }
  return events;
}

ContextKv ContextStore::ready(uint64_t id, Context& c, SwitchStats* stats) {
  const size_t n = c.chunks.size();
  std::vector<bool> recompute(n, false);
  std::vector<uint32_t> readable;
  for (uint32_t i = 0; i < n; ++i) {
    if (c.chunks[i].held) continue;
    if (opt_.policy == Policy::Lmk || !c.chunks[i].onDisk) recompute[i] = true;
    else readable.push_back(i);
  }
  if (opt_.policy == Policy::Llms && !readable.empty()) {  // eq. 4: recompute the heaviest where that is faster
    std::vector<size_t> bytes;
    for (uint32_t i : readable) bytes.push_back(c.chunks[i].diskBytes);
    const LoadPlan plan = planLoad(bytes, opt_.costs.recompute, opt_.costs.read);
    std::vector<uint32_t> kept;
    for (size_t j = 0; j < readable.size(); ++j) {
      if (plan.recompute[j]) recompute[readable[j]] = true;
      else kept.push_back(readable[j]);
    }
    readable = kept;
  }
  // The reads go on on their own thread, in chunk order, while this one recomputes.
  std::vector<std::promise<std::optional<KvChunk>>> promised(readable.size());
  std::vector<std::future<std::optional<KvChunk>>> reads;
  for (auto& p : promised) reads.push_back(p.get_future());
  std::thread reader([&] {
    for (size_t j = 0; j < readable.size(); ++j) {
      const uint32_t i = readable[j];
      KvChunk k;
      const ChunkId cid{model_, id, i, static_cast<uint32_t>(i * static_cast<uint32_t>(opt_.chunk))};
      const bool ok = readChunkFile(chunkFilePath(opt_.swapDir, id, i), cid, &k) == ChunkRead::Ok &&
                      k.tokens == opt_.chunk;
      promised[j].set_value(ok ? std::optional<KvChunk>(std::move(k)) : std::nullopt);
    }
  });
  struct Join {
    std::thread& t;
    ~Join() { t.join(); }
  } join{reader};

  // The chunks' values, token-major, become the context's rows once at the end (growing
  // the rows a chunk at a time copied them all each time: quadratic in the context).
  ContextKv past = emptyContextKv(lm_);
  const int64_t channels = kvChannels(past);
  const size_t chunkFloats = static_cast<size_t>(opt_.chunk * channels);
  std::vector<float> values;
  values.reserve(n * chunkFloats);
  size_t nextRead = 0;
  for (uint32_t i = 0; i < n; ++i) {
    Chunk& ch = c.chunks[i];
    if (ch.held) {  // decompressed where it is held
      memory_.touch({id, i});
      ++stats->inMemory;
      const std::vector<float> v = decompressChunk(ch.data);
      values.insert(values.end(), v.begin(), v.end());
      continue;
    }
    std::optional<KvChunk> got;
    if (!recompute[i]) {
      got = reads[nextRead++].get();
      if (got) ++stats->read;
      else ch.onDisk = false;  // missing, damaged or another model's: never used
    }
    if (got && got->channels == channels) {
      if (got->bits > ch.bits) *got = recompressChunk(*got, ch.bits);  // a file from before its bits went down
      const std::vector<float> v = decompressChunk(*got);
      values.insert(values.end(), v.begin(), v.end());
      hold(id, c, i, std::move(*got), true);
      continue;
    }
    ContextKv before = emptyContextKv(lm_);
    if (i > 0) appendChunk(before, values, static_cast<int64_t>(i) * opt_.chunk);
    const ContextKv rows = recomputeRows(ex_, lm_, c.tokens, static_cast<int64_t>(i) * opt_.chunk, opt_.chunk, before);
    const std::vector<float> v = chunkValues(rows, 0, opt_.chunk);
    values.insert(values.end(), v.begin(), v.end());
    ++stats->recomputed;
    hold(id, c, i, compressChunk(v.data(), opt_.chunk, channels, ch.bits), ch.onDisk);
  }
  if (n > 0) appendChunk(past, values, static_cast<int64_t>(n) * opt_.chunk);
  return past;
}

void ContextStore::keep(uint64_t id, Context& c, const ContextKv& rows) {
  const int64_t channels = kvChannels(rows);
  for (size_t i = c.chunks.size(); i < static_cast<size_t>(rows.tokens / opt_.chunk); ++i) {
    const std::vector<float> values = chunkValues(rows, static_cast<int64_t>(i) * opt_.chunk, opt_.chunk);
    c.chunks.emplace_back();
    c.chunks.back().bits = storedBits();
    hold(id, c, static_cast<uint32_t>(i), compressChunk(values.data(), opt_.chunk, channels, storedBits()), false);
  }
  if (opt_.policy == Policy::Llms && !c.chunks.empty()) {
    std::vector<double> density =
        chunkDensities(c.mass, opt_.chunk, static_cast<int64_t>(probs_.size()), c.heads);
    density.resize(c.chunks.size(), 0.0);  // recovered contexts' earlier tokens drew no recorded mass
    const std::vector<int> bits = allocateBits(density, opt_.ratio, {8, 4, 2});
    for (uint32_t i = 0; i < c.chunks.size(); ++i) {
      Chunk& ch = c.chunks[i];
      if (bits[i] >= ch.bits) continue;  // a chunk never gains bits back (its 8-bit values are gone)
      ch.bits = bits[i];
      // Its file, at more bits, stays: a load recompresses what it reads.
      if (ch.held) hold(id, c, i, recompressChunk(ch.data, bits[i]), true);
    }
  }
  if (opt_.policy == Policy::Lmk) return;
  for (uint32_t i = 0; i < c.chunks.size(); ++i)  // ahead-of-time swap-out: reclaiming them later costs nothing
    if (c.chunks[i].held && !c.chunks[i].onDisk) writeChunk(id, c, i);
}

void ContextStore::hold(uint64_t id, Context& c, uint32_t index, KvChunk data, bool fileMatches) {
  Chunk& ch = c.chunks[index];
  const ChunkKey key{id, index};
  if (ch.held) memory_.release(key);
  ch.held = false;
  ch.onDisk = ch.onDisk && fileMatches;
  ch.data = std::move(data);
  if (makeRoom(ch.data.bytes())) {
    memory_.claim(key, ch.data.bytes(), ch.data.bits);
    ch.held = true;
    peak_ = std::max(peak_, memory_.used());
    return;
  }
  // Not even the other contexts' chunks make room (this context alone fills the budget):
  // the chunk goes to its file, or is recomputed when next needed.
  if (opt_.policy != Policy::Lmk && !ch.onDisk) writeChunk(id, c, index);
  ch.data = KvChunk{};
}

bool ContextStore::makeRoom(size_t bytes) {
  std::vector<ChunkKey> victims;
  if (!memory_.reclaim(bytes, &victims)) return false;
  if (opt_.policy == Policy::Swap || opt_.policy == Policy::Lmk) {  // whole contexts go
    std::vector<ChunkKey> all;
    for (const ChunkKey& v : victims) {
      const Context& c = contexts_.at(v.context);
      for (uint32_t i = 0; i < c.chunks.size(); ++i)
        if (c.chunks[i].held && std::find(all.begin(), all.end(), ChunkKey{v.context, i}) == all.end()) all.push_back({v.context, i});
    }
    victims = std::move(all);
  }
  for (const ChunkKey& v : victims) swapOut(v);
  return true;
}

void ContextStore::swapOut(const ChunkKey& k) {
  Context& c = contexts_.at(k.context);
  Chunk& ch = c.chunks[k.index];
  if (opt_.policy != Policy::Lmk && !ch.onDisk) writeChunk(k.context, c, k.index);  // a refused write: recomputed later
  memory_.release(k);
  ch.held = false;
  ch.data = KvChunk{};
}

bool ContextStore::writeChunk(uint64_t id, Context& c, uint32_t index) {
  Chunk& ch = c.chunks[index];
  const std::string path = chunkFilePath(opt_.swapDir, id, index);
  // zstd where it pays: the read time the smaller file saves over the decompression's
  const LoadCosts& k = opt_.costs;
  const KeepCompressed keep = [&k](size_t raw, size_t packed) {
    return k.read.per * static_cast<double>(raw - packed) > k.unzstd.at(static_cast<double>(raw));
  };
  ch.diskBytes = writeFile(path, chunkFileBytes({model_, id, index, index * static_cast<uint32_t>(opt_.chunk)}, ch.data,
                                                k.unzstd.per > 0 ? keep : KeepCompressed{}));
  ch.onDisk = ch.diskBytes > 0;
  if (ch.onDisk && writes_) unsynced_[path] = {id, index};
  return ch.onDisk;
}

void ContextStore::writeRecord(uint64_t id, const Context& c) {
  writeFile(contextLogPath(opt_.swapDir, id), contextRecordBytes(model_, {id, c.owner, c.tokens}));
}

size_t ContextStore::writeFile(const std::string& path, std::vector<uint8_t> bytes) {
  std::string error;
  DurableWrites once;
  const size_t n = (writes_ ? *writes_ : once).add(path, std::move(bytes), &error);
  if (n && (writes_ || once.commit().empty())) return n;
  ++refused_;
  return 0;
}

void ContextStore::commitWrites() {
  const std::unique_ptr<DurableWrites> w = std::move(writes_);
  for (const auto& failed : w->commit()) {
    ++refused_;
    const auto k = unsynced_.find(failed.first);
    if (k == unsynced_.end()) continue;  // a record: the one before stays
    const auto c = contexts_.find(k->second.context);
    if (c != contexts_.end() && k->second.index < c->second.chunks.size()) c->second.chunks[k->second.index].onDisk = false;
  }
  unsynced_.clear();
}

std::vector<ContextStore::Info> ContextStore::list() const {
  std::vector<Info> out;
  for (const auto& [id, c] : contexts_) {
    Info i;
    i.id = id;
    i.owner = c.owner;
    i.tokens = static_cast<int64_t>(c.tokens.size());
    for (const Chunk& ch : c.chunks) {
      if (ch.held) ++i.inMemory[ch.bits];
      if (ch.onDisk) ++i.onDisk[ch.bits];
    }
    out.push_back(std::move(i));
  }
  return out;
}

}  // namespace tl
