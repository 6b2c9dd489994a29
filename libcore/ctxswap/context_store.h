// LLM contexts under a memory budget (LLMS 3, issue 11): what tl-ctxswap's service and its
// replays run on. A context is its token log (kept, and written to the swap directory at
// the end of every call) and its KV rows in chunks of `chunk` tokens, all layers of those
// tokens a chunk (kv_chunk.h). Chunks are claimed in memory under the budget, reclaimed
// (their files written ahead of time, so reclaiming costs nothing), loaded back (read, or
// recomputed from the tokens) when their context is called, and never used when their file
// is missing, damaged or another model's (recomputed instead). The rows after the last
// whole chunk are not kept: each call recomputes them with its prompt.
//
// Policies (LLMS 5.1's baselines and the full design):
//   llms     chunks written at 8 bits, then 8, 4 or 2 by tolerance (eq. 1-3) at a global
//            ratio; reclaim in LCTRU order; a load reads some chunks and recomputes the
//            heaviest others, split by eq. 4 with the reads overlapped;
//   vllm-s   chunks uncompressed (fp32), swapped, least recently used first;
//   vllm-sq  chunks at 8 bits, swapped, least recently used first;
//   swap     whole contexts uncompressed: a reclaim takes every chunk of the context;
//   lmk      whole contexts killed: nothing is written, a load recomputes everything.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ctxswap/calibrate.h"
#include "ctxswap/chunk_memory.h"
#include "ctxswap/durable_file.h"
#include "ctxswap/kv_chunk.h"
#include "ctxswap/recompute.h"
#include "lm/batch.h"
#include "lm/causal_lm.h"
#include "lm/speculative.h"
#include "runtime/executor.h"
#include "sample/sampler.h"

namespace tl {

enum class Policy { Llms, VllmS, VllmSq, Swap, Lmk };
Policy parsePolicy(const std::string& name);  // throws tl::Error (usage) for others
const char* policyName(Policy p);

struct StoreOptions {
  Policy policy = Policy::Llms;
  size_t budget = size_t{256} << 20;  // bytes of KV chunks held in memory
  std::string swapDir;                // chunk files and token logs
  int64_t chunk = 16;                 // tokens a chunk
  double ratio = 0.5;                 // llms: mean bits / 8 over a context's chunks
  LoadCosts costs;                    // the load split (llms) and where zstd pays (calibrate.h)
  int64_t maxContextsPerOwner = 16, maxTokens = 4096;
};

// Throws tl::Error, saying why, where a store over this model and policy cannot decode
// `maxBatch` calls together (ContextStore::enableBatch): fewer than 1, speculative calls,
// a model without tl-plan's in-place caches of that many batch rows, the llms policy.
void checkBatchable(const Executor& ex, const CausalLm& lm, Policy policy, int64_t maxBatch, bool speculative);

// Throws tl::Error, saying why, where a store over this model and policy cannot make
// speculative calls (ContextStore::setDrafter): no in-place caches, the llms policy.
void checkSpeculative(const CausalLm& lm, Policy policy);

// What making a context ready for a call took (LLMS's context switch): its chunks found in
// memory, read from files, recomputed, and the seconds until its rows were in place.
struct SwitchStats {
  double seconds = 0;
  int64_t inMemory = 0, read = 0, recomputed = 0;
};

struct CallResult {
  std::vector<int64_t> reply;  // greedy tokens
  SwitchStats load;
  int64_t drafted = 0, accepted = 0;  // speculative calls' drafts, and those taken
};

class ContextStore {
 public:
  // Recovers the contexts recorded in opt.swapDir for this model (context_log.h); the
  // ones skipped, and why, are in recoveryNotes(). Throws tl::Error for a model without
  // KV cache inputs or a swap directory that cannot be read or created.
  ContextStore(Executor& ex, CausalLm& lm, uint64_t modelFingerprint, StoreOptions opt);

  // A new context of `owner`, its log starting with `system` (may be empty).
  uint64_t create(const std::string& owner, const std::vector<int64_t>& system);
  // Appends the prompt to the context, generates `generate` tokens after it (greedy by
  // default; sampled and seeded by `sampling`), and keeps them; onToken (when given) hears
  // each token as it comes. Throws tl::Error (bad input) for an unknown context, another
  // owner's, or a context that would pass maxTokens; the store is unchanged then.
  CallResult call(uint64_t id, const std::string& owner, const std::vector<int64_t>& prompt, int64_t generate,
                  const std::function<void(int64_t)>& onToken = {}, const SamplingOptions& sampling = {});
  void remove(uint64_t id, const std::string& owner);
  // Speculative calls (serve --prompt-lookup, --draft): each decode run checks the last
  // token and up to draftMax drafts of `drafter` (lm/speculative.h), the sampler choosing
  // each row's token in plain decoding's order, so that a reply is the one without drafts.
  // Not with batched calls.
  void setDrafter(Drafter* drafter, int64_t draftMax);

  // Batched calls (serve --max-batch N, Inferflow 5): up to N calls decode together, one
  // run a step over tl-plan's in-place caches, a batch row each (lm/batch.h). A call
  // joins at the next step: its context made ready and its prompt run alone in batch row 0
  // (as call() runs it); it leaves when done, its new rows read back from its row and kept
  // as call() keeps them, so its reply is call()'s. A second call on a context waits for
  // the first. Throws tl::Error for a model without in-place caches of N rows, and for the
  // llms policy (its tolerance reads each step's attention probabilities).
  void enableBatch(int64_t maxBatch);  // (checkBatchable first)
  int64_t maxBatch() const { return batch_ ? maxBatch_ : 0; }
  // Queues a call (checked as call() checks it, throwing before anything changes); returns
  // its handle.
  uint64_t begin(uint64_t id, const std::string& owner, const std::vector<int64_t>& prompt, int64_t generate,
                 const SamplingOptions& sampling = {});
  // What advance() made: a call's next token, or its end (its result, or the error that
  // ended it: its context is as before the call then).
  struct CallEvent {
    uint64_t call = 0;
    int64_t token = -1;
    bool done = false;
    CallResult result;
    std::string error;
  };
  // Admits queued calls while rows are free, then runs one step of every running call.
  std::vector<CallEvent> advance();
  bool busy() const { return !queued_.empty() || !running_.empty(); }

  struct Info {
    uint64_t id = 0;
    std::string owner;
    int64_t tokens = 0;
    std::map<int, int64_t> inMemory, onDisk;  // chunks by bits
  };
  std::vector<Info> list() const;
  size_t memoryUsed() const { return memory_.used(); }
  size_t budget() const { return opt_.budget; }
  int64_t contexts() const { return static_cast<int64_t>(contexts_.size()); }
  size_t peakMemory() const { return peak_; }
  const std::vector<std::string>& recoveryNotes() const { return notes_; }
  // Writes that the file system refused (a full or read-only swap directory): the chunks
  // stayed in memory or will be recomputed.
  int64_t refusedWrites() const { return refused_; }

 private:
  struct Chunk {
    bool held = false;     // in memory, as `data`
    KvChunk data;
    int bits = 8;          // the bits it is kept at
    bool onDisk = false;   // a usable file: at its bits or more (or found at recovery)
    size_t diskBytes = 0;  // that file's bytes (for the load split)
  };
  struct Context {
    std::string owner;
    std::vector<int64_t> tokens;
    std::vector<Chunk> chunks;  // whole chunks only
    std::vector<double> mass;   // attention each token drew so far (llms)
    int64_t heads = 1;
  };
  Context& owned(uint64_t id, const std::string& owner);
  ContextKv ready(uint64_t id, Context& c, SwitchStats* stats);
  void keep(uint64_t id, Context& c, const ContextKv& rows);
  // Holds a chunk's data in memory where the budget allows, else writes it out;
  // fileMatches: its file (if any) holds these very bits.
  void hold(uint64_t id, Context& c, uint32_t index, KvChunk data, bool fileMatches);
  bool makeRoom(size_t bytes);
  void swapOut(const ChunkKey& k);
  bool writeChunk(uint64_t id, Context& c, uint32_t index);
  void writeRecord(uint64_t id, const Context& c);
  // While a WriteGroup lives (a call's end; a batched step's ends), chunk files and records
  // go out as one group commit (durable_file.h) when it ends: a sync or two, not two a file.
  class WriteGroup;
  std::unique_ptr<DurableWrites> writes_;
  std::map<std::string, ChunkKey> unsynced_;  // the group's chunk files
  // A durable write, into the group or at once: the file's bytes, 0 where refused.
  size_t writeFile(const std::string& path, std::vector<uint8_t> bytes);
  void commitWrites();  // a chunk whose file failed is not on disk (read back: recomputed)
  int storedBits() const;

  // A batched call: its context's rows so far on the host (`past`), the rest in its batch row.
  struct Running {
    uint64_t call = 0, id = 0;
    std::string owner;
    std::vector<int64_t> prompt;
    int64_t generate = 0;
    SamplingOptions sampling;
    int64_t seq = 0;  // its BatchDecoder id (0: not joined)
    std::vector<int64_t> all;  // the context's tokens, the prompt's and the reply's so far
    ContextKv past;            // its rows up to `kept` tokens; those after are in its batch row
    CallResult result;
    std::unique_ptr<Sampler> sampler;
    bool locked = false;  // its context's chunks (ChunkMemory::lock)
  };
  void checkCall(const Context& c, const std::vector<int64_t>& prompt, int64_t generate) const;
  void admit(Running& r, std::vector<CallEvent>* events);
  void take(Running& r, int64_t token, std::vector<CallEvent>* events);  // its next token
  // The rows after past.tokens, up to `length`, of the in-place caches' batch row `row`,
  // read back onto past (a call's rows, decoded there).
  void appendCacheRows(ContextKv& past, int64_t row, int64_t length);
  void finish(Running& r);  // its rows read back and kept, it leaves the batch
  void drop(Running& r);    // it leaves the batch, nothing kept

  Executor& ex_;
  CausalLm& lm_;
  uint64_t model_;
  StoreOptions opt_;
  std::vector<std::string> probs_;  // attentionProbabilities (llms)
  std::map<uint64_t, Context> contexts_;
  ChunkMemory memory_;
  uint64_t next_ = 1;
  size_t peak_ = 0;
  int64_t refused_ = 0;
  std::vector<std::string> notes_;
  Drafter* drafter_ = nullptr;
  int64_t draftMax_ = 3;
  std::unique_ptr<BatchDecoder> batch_;
  int64_t maxBatch_ = 0;
  uint64_t nextCall_ = 1;
  std::vector<Running> queued_, running_;
};

}  // namespace tl
