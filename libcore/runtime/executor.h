// Executor: runs a model on an OpenCL device (Transformer-Lite 2.1's schedule).
//
// Construction uploads every constant once and checks that each tensor-computing
// node has a kernel for its dtypes (an error names the node before anything runs).
// A run binds the symbols from the input shapes, evaluates every shape expression
// of tl-shape's analysis once on the host, then enqueues all tensor ops without
// synchronizing; the only waits are the final reads of the requested outputs.
// Activation buffers live on the device and are reused across runs; one grows only
// when a binding needs more than it holds. Views (isView, and isRunView at a binding)
// share their input's buffer.
//
// One class, its jobs in files of runtime/executor/: executor.cpp (construction, the step
// loop, reading results), buffers.cpp (buffers, views and sub-buffers, memory use),
// plan.cpp (tl-plan's arena and in-place KV caches), uploads.cpp (the upload arena),
// host_nodes.cpp (host evaluation), launches.cpp (launch sites, their recording and
// replay, explain()), chains.cpp (a replay's CPU task launches joined), profile.cpp
// (device times). What each node launches is lowering's
// (runtime/lower/).
#pragma once

#include <CL/cl.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "graph/graph.h"
#include "onnx/model_io.h"
#include "runtime/device.h"
#include "runtime/kernel_library.h"
#include "shape/binding.h"
#include "shape/shape_inference.h"
#include "tensor/tensor.h"

namespace tl {

struct OpTime {
  std::string node, op;
  double ms = 0;
  int64_t index = -1;  // the graph node that enqueued it; -1 for the executor's own commands
  std::string kernel;  // the kernel launched ("" for the executor's own commands)
};

// The most rows a step may feed and still take the decode kernels, which give each row
// what a step of that row alone gives it (a speculative check keeps the model's own greedy
// tokens only there: lm/speculative.h): the GPU GEMVs and attention take 4 rows, the CPU
// tasks 8 (GEMV rows in pairs, attention's up to 8 a task).
constexpr int64_t kGpuDecodeRows = 4, kCpuDecodeRows = 8;

// What a launch's argument is (Launch's setters): task chains (executor/chains.cpp) pass
// buffers as arguments and scalars through a buffer of their bits.
enum class ArgKind { Mem, Int, Long, Float, Int8, Raw };
// A launch of a TASK_KERNEL (Launch::task): its multiply-adds (0: not one), and whether
// any count of its tasks computes it.
struct TaskWork {
  int64_t work = 0;
  bool spreads = false;
};

class Executor {
 public:
  Executor(Device& device, const Model& model, const Graph& graph, const ShapeAnalysis& analysis);
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Runs with the given graph inputs (by name; every input must be given, with the
  // declared dtype and a shape the model accepts). Returns the outputs named in
  // `wanted` (all graph outputs when empty), in that order.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs, const std::vector<std::string>& wanted = {});

  // An input filled on the device from a tensor of the previous run (present.* ->
  // past_key_values.*), so a decode loop never moves the cache through the host. A tensor
  // a kernel writes gives the input its buffer (no copy); others are copied (CacheCarry).
  struct Carry {
    std::string input, fromTensor;
  };
  // Enqueues a run and returns without waiting; read results with read().
  void enqueue(const std::vector<Tensor>& hostInputs, const std::vector<Carry>& carried);
  // Reads `count` elements of a tensor from `offset` (blocking: the run's one sync).
  std::vector<float> readFloats(const std::string& tensor, int64_t offset, int64_t count);
  // The index of the largest of `count` floats of a tensor from `offset` (the first of
  // equals), found on the device: a greedy decode step reads back 8 bytes, not the logits
  // (blocking: the run's one sync). Floats that are no number (NaN, +inf) are refused,
  // naming the first, as the sampler refuses them (tokensAt likewise).
  int64_t argmax(const std::string& tensor, int64_t offset, int64_t count);
  // Greedy decoding without a wait per token (CausalLm::generateGreedy, BatchDecoder's
  // generateGreedy). argmaxToSlot enqueues argmax()'s kernel over `rows` rows of `count`
  // floats each (a batched step's rows, one token each) into one of two device slots, and a
  // read of the slot that does not wait; feedToken makes the next run's input of as many
  // tokens that slot's tokens, copied on the device after the run's uploads, so the run can
  // be enqueued before the host knows them; tokensAt waits for a slot's read. A replayed run
  // fed so does not wait for the run before it: the host enqueues a step while the device
  // runs the last one.
  void argmaxToSlot(const std::string& tensor, int64_t offset, int64_t count, int slot, int64_t rows = 1);
  void feedToken(const std::string& input, int slot);
  std::vector<int64_t> tokensAt(int slot);

  // A node's cost at the last run's shapes (ops/op_table.h's opCost).
  OpCost nodeCost(size_t node) const;
  // The last run's launches in order: the node, its op, the kernel variant it took, its
  // geometry (global and work-group sizes) and why (tl-run --explain).
  struct LaunchNote {
    std::string node, op, kernel, why;
    cl_uint dims = 1;
    size_t global[3] = {1, 1, 1}, local[3] = {1, 1, 1};
  };
  std::vector<LaunchNote> explain() const;

  // Device time per enqueued kernel of the last run, per cache copy carried into it
  // (op "CacheCarry") and per argmax() (op "ArgMax"), while the device profiles.
  const std::vector<OpTime>& profile() const { return profile_; }
  // Device memory this executor holds, in bytes: constants (weights), the tensors named
  // in `cache` (a decoder's past_key_values.* and present.*), and the rest (activations,
  // the plan's and the uploads' arenas, kernels' scratch).
  struct MemoryUse {
    size_t constants = 0, cache = 0, activations = 0;
  };
  MemoryUse memoryUse(const std::vector<std::string>& cache) const;
  // Times the host has waited on the device so far (blocking reads, finishes). A
  // decode step costs one: reading its logits.
  int64_t syncs() const { return syncs_; }
  // Host seconds spent in enqueue() so far: binding, host nodes, uploads, lowering and
  // the OpenCL enqueue calls, not waits on the device (tl's own work per run).
  double enqueueSeconds() const { return enqueueSeconds_; }
  // Host seconds of enqueueSeconds() spent inside OpenCL calls (enqueues and writes): the
  // rest is tl's own work.
  double openclSeconds() const { return openclSeconds_; }
  // Runs so far that replayed the last run's launches (same shapes and bucket).
  int64_t replays() const { return replays_; }

  // Used by lowering: the state of the run being enqueued.
  struct Buffer {
    cl_mem mem = nullptr;
    size_t capacity = 0;
  };
  Device& device() { return device_; }
  KernelLibrary& kernels() { return kernels_; }
  const Graph& graph() const { return graph_; }
  const ShapeAnalysis& analysis() const { return analysis_; }
  const std::vector<int64_t>& shape(const std::string& tensor) const;
  const std::vector<int64_t>& value(const std::string& tensor) const;  // a folded tensor's elements
  cl_mem buffer(const std::string& tensor) const;
  // A kernel's operand: buffer(), after uploading a folded tensor's values when this
  // binding changed them (only tensors that kernels read as data go up, once per change).
  cl_mem operand(const std::string& tensor);
  void recordEvent(size_t node, cl_event e, const std::string& kernel);
  // The kernel object of the next launch site of the node being lowered (its own object,
  // so that its arguments stay set for replays; `site` receives its index), and that
  // site's launch. `why` is the lowering's reason for the kernel (explain()).
  cl_kernel siteKernel(const std::string& name, const char* why, size_t* site);
  void launchSite(size_t site, cl_uint dims, const size_t* global, const size_t* local, int64_t cacheBytes = 0,
                  TaskWork task = {});
  // Argument `index` of a launch site as last set (Launch's setters): what a task chain
  // passes its kernel.
  void siteArg(size_t site, cl_uint index, ArgKind kind, const void* value, size_t size);
  // The replayed run's task chains (executor/chains.cpp), as tl-run --explain lists them:
  // the first and last launch of explain()'s list each joins (from 0), and its work-groups.
  struct ChainNote {
    size_t first = 0, last = 0, groups = 1;
  };
  std::vector<ChainNote> chains() const;
  // Checks every buffer's guard (DeviceInfo::guardBytes; nothing when off) once the queue
  // is done: throws tl::Error (ExitCode::Device) naming the first buffer a kernel wrote
  // past. Each run that waits for the device calls it.
  void checkGuards();
  // A device buffer for a kernel's intermediate data (not a graph tensor), by key.
  void scratch(const std::string& key, size_t bytes) { ensure(key, bytes); }
  // ... whose bytes are zero when made or grown, for kernels that leave them at zero when
  // they finish (counters).
  void zeroedScratch(const std::string& key, size_t bytes);
  // A float scratch tensor with a shape: a stand-in that a node's lowering runs on.
  void scratchTensor(const std::string& key, const std::vector<int64_t>& dims);
  // Rows of graph output `output` that the coming runs need: its last `rows` (0: all, the
  // default). A causal LM's step reads the last position's logits (as llama.cpp computes
  // only the outputs a batch asks for), so the node making them runs on those rows only
  // and leaves the rest unwritten (lower/matmul.cpp). Changing it re-lowers that node;
  // run() sets every output back to all rows.
  void keepLastRows(const std::string& output, int64_t rows);
  int64_t lastRowsKept(const std::string& tensor) const {
    auto it = lastRows_.find(tensor);
    return it == lastRows_.end() ? 0 : it->second;
  }
  // Has a later node of this run lowered again (its launch depends on what this one chose).
  void relower(size_t node) { dirty_.at(node) = 1; }
  bool dryRun() const { return dry_; }
  // An in-place KV cache tensor's element strides between batches, heads and tokens
  // (tl.plan.kv: its input and output are one buffer); nullptr for any other tensor.
  const std::vector<int64_t>* cacheStrides(const std::string& tensor) const;
  // The in-place caches' capacity in tokens (the plan's --max-seq; 0 without them).
  int64_t cacheCapacity() const { return kv_.empty() ? 0 : kvCapacity_; }
  // kGpuDecodeRows or kCpuDecodeRows, as lowering picks this device's kernels.
  int64_t decodeRows() const { return device_.gpuKernels() ? kGpuDecodeRows : kCpuDecodeRows; }
  // Takes the in-place caches back to their first `rows` tokens (speculative decoding drops
  // the drafted tokens the model did not take): the rows after are stale, hidden from the
  // next run as a bucket's padding is, and overwritten as it appends. Throws without
  // in-place caches, or for more rows than they hold.
  void rewindCaches(int64_t rows);
  // Batch rows as sequences of their own (lm/batch.h): the tokens each of the next run's
  // batch rows holds in the in-place caches (rows.size() rows, at most the caches' batch,
  // each at most their capacity). A run appends after each row's own length and puts each
  // row's causal mask there (kernels read kv_rows[b]); the longest row binds the caches'
  // length, the keys of a shorter row past its own are padding, hidden. A run whose caches
  // are given as data sets every row to their length.
  void setCacheRows(const std::vector<int64_t>& rows);
  // Each batch row's tokens in the caches after the last run (or setCacheRows).
  const std::vector<int64_t>& cacheRows() const { return kvLens_; }
  // The batch rows the in-place caches hold (tl-plan's --batch; 0 without them).
  int64_t cacheBatch() const { return kv_.empty() ? 0 : kv_[0].B; }
  // Copies the first `rows` tokens of batch row `from` of every in-place cache into row
  // `to` (a sequence moving to another row), through the host.
  void copyCacheRow(int64_t from, int64_t to, int64_t rows);
  // Tokens [first, first + count) of batch row `row` of the in-place cache that input
  // `cacheInput` names, as fp32 [heads, count, size] (a sequence's rows, for the host to
  // keep: tl-ctxswap's batched calls).
  std::vector<float> readCacheRow(const std::string& cacheInput, int64_t row, int64_t first, int64_t count);
  // The in-place caches' element (tl-plan --kv-type; the kernels that read or write a cache
  // were built for it, kernel_library.h), and the bytes of n elements of a head row.
  KvType kvType() const { return kernels_.kvType(); }
  int64_t kvBytes(int64_t n) const { return static_cast<int64_t>(tl::kvBytes(kvType(), n)); }
  // Whether two tensors' device bytes may overlap at this binding (the plan's buffers are
  // regions of one arena, views share their input's): a launch that reads one while it
  // writes the other must know.
  bool overlaps(const std::string& a, const std::string& b) const;
  // The device int32 that holds the caches' true length before a run's new tokens: where
  // the appends write, and where the causal mask puts query row 0 (under --pad the bound
  // length is a bucket's).
  static constexpr const char* kKvRows = "tl.kv.rows";
  // Bytes of cache that the last run's kernels wrote (in-place caches: the new tokens'
  // rows only) and that commands copied (CacheCarry, relayouts): what a decode step moves.
  struct CacheTraffic {
    int64_t written = 0, copied = 0;
  };
  const CacheTraffic& cacheTraffic() const { return traffic_; }

 private:
  void prepare(const SymbolValues& binding);
  void setShape(const std::string& name, const TensorShape& t, const SymbolValues& binding);
  const std::string& root(const std::string& tensor) const;  // the tensor whose buffer `tensor` uses
  const Buffer& rootBuffer(const std::string& tensor) const;  // that buffer; throws when there is none
  Buffer& ensure(const std::string& tensor, size_t bytes);
  void upload(const std::string& tensor, const void* data, size_t bytes);
  void uploadFolded(const std::string& tensor);  // a folded tensor's values
  std::vector<uint8_t> foldedBytes(const std::string& tensor) const;  // those values in the tensor's dtype
  void collectProfile();
  // After a wait for the device: nothing pending, one sync more, its profile collected and
  // the guards checked (checkGuards).
  void synced();
  static int64_t checkedToken(int64_t at);  // argmax results: a negative one names a NaN or inf
  void releaseEvents();

  Device& device_;
  KernelLibrary kernels_;
  const Model& model_;
  const Graph& graph_;
  const ShapeAnalysis& analysis_;
  std::vector<size_t> tensorNodes_;  // tensor-computing nodes in topological order
  std::vector<size_t> kernelNodes_;  // the same, less the views
  std::unordered_set<std::string> kernelOutputs_;  // what kernelNodes_ write
  std::vector<size_t> runNodes_;     // kernelNodes_ less this binding's views: what the run enqueues
  std::unordered_map<std::string, Buffer> buffers_;
  // A buffer of `bytes` (and its guard, DeviceInfo::guardBytes), for `what` (errors name it).
  cl_mem createBuffer(size_t bytes, const std::string& what);
  void releaseBuffer(cl_mem mem);  // a reference to one, its guard no longer checked
  static constexpr cl_uchar kGuardFill = 0xA5;
  struct Guard {
    size_t at;  // where the guard starts: the bytes the buffer was made for
    std::string what;
  };
  std::unordered_map<cl_mem, Guard> guards_;
  std::unordered_map<std::string, std::string> aliases_;     // a view's output -> the tensor whose buffer it is
  std::unordered_map<std::string, std::string> runAliases_;  // the same for this binding's views (isRunView)
  // This binding's contiguous Slices from a later element than 0 of a kernel's output
  // (sliceRunOffset): a sub-buffer of that output's allocation, no kernel. Entries stay
  // (recordings point at their Buffer); `active` says whether the Slice is one now.
  struct SubView {
    bool active = false;
    std::string root;                // the kernel output it reads
    size_t offset = 0, bytes = 0;    // where in the root's buffer
    cl_mem parent = nullptr;         // what buf.mem was made from, and where in it
    size_t origin = 0;
    Buffer buf;
  };
  std::unordered_map<std::string, SubView> subViews_;
  std::unordered_map<std::string, size_t> planOrigins_;  // a planned tensor's offset in planArena_
  std::unordered_set<std::string> graphOutputs_;         // they keep buffers of their own
  const SubView* activeSubView(const std::string& tensor) const;  // nullptr: none at this binding
  struct Extent {  // where a tensor's bytes lie: an allocation and a byte range of it
    cl_mem base = nullptr;
    size_t begin = 0, end = 0;
  };
  Extent extent(const std::string& tensor) const;
  bool subViewAt(const onnx::NodeProto& n, SubView* v) const;
  // runView_'s values: 0 a kernel, 1 an alias (isRunView), 2 a sub-view (where, in *at)
  char viewKind(size_t node, SubView* at) const;
  void refreshSubViews();            // (re)makes the active sub-views' sub-buffers where their roots moved
  std::unordered_map<std::string, std::vector<int64_t>> shapes_;
  std::unordered_map<std::string, int64_t> lastRows_;  // keepLastRows
  std::unordered_map<std::string, std::vector<int64_t>> values_;
  // Tensors whose dims or values depend on symbols, with those symbols: a binding
  // re-evaluates only those whose symbols changed (a decode step: the past length's).
  struct Dependent {
    const std::string* name;
    const TensorShape* shape;
    std::vector<std::string> symbols;
  };
  std::vector<Dependent> dependent_;
  SymbolValues bound_;                       // the binding shapes_ and values_ hold
  std::unordered_set<std::string> stale_;    // folded tensors whose device copy is out of date
  std::unordered_set<std::string> foldedRead_;  // folded tensors kernels have read as data
  std::unordered_map<std::string, std::vector<uint8_t>> staging_;  // host side of pending uploads
  // A run's uploads (inputs, host results, folded values) go up in one write: each of
  // those tensors is a region (a sub-buffer) of one upload arena, and the regions a run
  // writes are contiguous while the set of tensors stays the same (every decode step).
  // On NVIDIA's OpenCL each write at the start of a step costs 15-100 us.
  struct Region {
    size_t offset = 0, capacity = 0;
    cl_mem sub = nullptr;
  };
  struct PendingUpload {
    std::string name;
    std::vector<uint8_t> bytes;
  };
  std::vector<PendingUpload> pendingUploads_;
  // tl-plan's memory plan (docs/artifacts.md), when the model has one: every buffer at
  // its largest within --max-seq, in one arena allocated at construction; the tensors a
  // kernel writes (not graph outputs) use their buffer's region. A binding that needs
  // more than a region holds is refused before the run starts.
  cl_mem planArena_ = nullptr;
  std::vector<cl_mem> planRegions_;
  std::unordered_map<std::string, cl_mem> planned_;  // tensor -> its region
  std::unordered_map<std::string, size_t> plannedOutputs_;  // graph outputs (the cache) -> bytes at max-seq
  int64_t planMaxSeq_ = 0;
  bool planEnforced_ = false;  // after construction (the dry run binds nominal sizes)
  void usePlan();
  std::unordered_map<std::string, Region> regions_;
  std::vector<std::string> regionOrder_;  // by offset
  cl_mem uploadArena_ = nullptr;
  std::vector<uint8_t> arenaHost_;  // the arena's bytes as last written
  void stageUpload(const std::string& tensor, const void* data, size_t bytes);
  void flushUploads();
  void writeUploads(size_t from, size_t to);  // arenaHost_[from, to) to the device arena
  void layoutUploads();
  // Launch sites (a launch list per node): each launch of a node owns a kernel object
  // whose arguments stay set, and a node is replayed, not lowered again, while no tensor it
  // touches changed shape or value and its arguments' buffers are the same (a decode step
  // lowers only the nodes that touch the growing cache).
  struct Site {
    std::string kernel;
    const char* why = "";
    cl_kernel k = nullptr;
    std::vector<std::pair<std::string, cl_kernel>> made;  // every kernel this site has run (prefill, decode)
    cl_uint dims = 1;
    size_t global[3] = {1, 1, 1}, local[3] = {1, 1, 1};
    int64_t cacheBytes = 0;  // bytes of in-place cache its launch writes
    TaskWork task;           // Launch::task
    struct Arg {
      ArgKind kind = ArgKind::Raw;
      std::vector<uint8_t> bytes;
    };
    std::vector<Arg> args;  // as last set
  };
  struct Recording {
    std::vector<Site> sites;                                 // in the order lowering asked for them
    std::vector<size_t> runs;                                // the sites in launch order
    std::vector<std::pair<const Buffer*, cl_mem>> buffers;  // what the arguments point at
    bool valid = false;
  };
  void lowerOrReplay(size_t node);
  void enqueueSite(size_t node, const Site& site);
  std::vector<Recording> recordings_;                               // by node index
  std::vector<char> dirty_;                                         // by node index
  std::unordered_map<std::string, std::vector<size_t>> touching_;  // tensor -> the nodes reading or writing it
  std::vector<char> runView_;                                       // by node index, at the current binding
  size_t recording_ = static_cast<size_t>(-1);                      // the node being lowered
  size_t nextSite_ = 0;
  struct NodeEvent {
    size_t node;
    cl_event e;
    std::string kernel;
  };
  std::vector<NodeEvent> events_;
  struct ExtraEvent {  // a command of a run that no node enqueued
    std::string name, op;
    cl_event e;
  };
  std::vector<ExtraEvent> extraEvents_;
  cl_mem argmaxOut_ = nullptr;  // argmax()'s one result
  void enqueueArgmax(const std::string& tensor, int64_t offset, int64_t count, cl_mem out, int64_t rows = 1);
  cl_mem tokenSlots_[2] = {nullptr, nullptr};  // argmaxToSlot's results
  size_t slotCapacity_[2] = {0, 0};  // (tokens)
  std::vector<cl_long> tokenHost_[2];  // a slot's last argmax: as many as its rows
  cl_event tokenRead_[2] = {nullptr, nullptr};
  std::string fedInput_;  // feedToken's, for the next run (fedSlot_ -1: none)
  int fedSlot_ = -1;
  std::unordered_set<std::string> deviceFed_;  // inputs feedToken has filled: no host node reads them
  void copyFedToken();
  cl_event uploadsWritten_ = nullptr;  // the last write from arenaHost_, which the next run rewrites
  std::vector<OpTime> profile_;
  // Host evaluation (ops/host_eval.h): a node that only integer inputs, folded values, small
  // constants and other such nodes feed runs on the host while its output is small
  // (kHostElements); device nodes read its result, uploaded at the start of the run.
  static constexpr int64_t kHostElements = 1 << 16;
  std::vector<size_t> hostable_;                              // such nodes, in topological order
  std::unordered_map<std::string, size_t> hostProducer_;      // their outputs -> node
  std::unordered_set<std::string> hostInputs_;                // integer inputs they may read
  std::unordered_map<std::string, Tensor> hostConstants_;     // small constants they read
  std::vector<char> onHost_;                                  // by node index, at this binding
  std::vector<size_t> hostRun_;                               // this binding's host nodes
  std::unordered_set<std::string> deviceReads_;               // buffers this binding's kernels read
  std::vector<std::string> hostUploads_;                      // host results among them
  std::unordered_map<std::string, Tensor> hostValues_;        // this run's host tensors
  const Tensor& hostValue(const std::string& tensor);
  void findHostNodes(const std::unordered_map<std::string, const onnx::TensorProto*>& constants);
  // The in-place KV caches (tl.plan.kv, plan/kv_cache.h), one buffer of the plan's max-seq
  // tokens per pair, zeroed at start (padding keys are read, hidden, never garbage).
  struct KvCache {
    std::string past, present;
    cl_mem mem = nullptr;
    int64_t B = 0, H = 0, D = 0;
    std::vector<int64_t> strides;  // b, head, token
  };
  std::vector<KvCache> kv_;
  std::unordered_map<std::string, size_t> kvOf_;  // past and present -> their cache
  int64_t kvCapacity_ = 0, kvPad_ = 1;
  // The element the model's plan keeps its caches in (tl.plan.kv_options' type), read before
  // the kernels are built.
  static KvType planKvType(const Model& model);
  bool kvSequenceFirst_ = true;
  std::vector<std::string> kvMasks_;  // inputs padded with zeros to a bucket
  int64_t kvRows_ = 0;                // tokens in the caches after the last run: the longest row's
  std::vector<int64_t> kvLens_{0};    // ... each batch row's (kv_rows, uploaded each run)
  void uploadCacheRows(uint8_t* at) const;  // kvLens_ as the int32s the kernels read
  int64_t kvBatch_ = 1;               // the batch rows the caches hold (at most the plan's)
  void useKvPlan(const std::unordered_map<std::string, std::string>& meta, int64_t batch);
  void writeCache(const KvCache& c, const Tensor& t);
  std::vector<uint8_t> readCache(const KvCache& c, int64_t rows);
  void rowOrigin(const KvCache& c, int64_t batchRow, int64_t first, size_t* origin) const;
  CacheTraffic traffic_;
  // Replay (issue 10's launch list): a run whose given inputs have the last run's shapes
  // (a key mask's length aside), the same carries and the same cache bucket binds what the
  // last run bound, so it re-enqueues that run's launches as recorded: no binding, no shape
  // evaluation, no lookup by name. Its host nodes run again on its inputs, and inputs and
  // host results go into their upload regions in the writes the last run made; with command
  // buffers every launch goes in one call. Recorded for runs whose carries are all in-place
  // caches.
  struct Replay {
    bool valid = false;
    std::vector<std::string> names;          // the given inputs, in the order given
    std::vector<std::vector<int64_t>> dims;  // their dims (a key mask's last: the caches' length)
    std::vector<DType> dtypes;
    std::vector<char> isMask;
    std::vector<std::pair<std::string, std::string>> carried;
    int64_t fresh = 0, bucket = 0;           // tokens a run appends; the bound cache length after it
    std::vector<std::pair<size_t, size_t>> launches;  // (node, site), in order
    // Task chains (executor/chains.cpp): runs of launches [first, first + count) that one
    // kernel replays; steps: what a replay enqueues, each a launch's index in `launches` or
    // (chain c) ~c.
    struct Chain {
      size_t first = 0, count = 0;
      cl_kernel k = nullptr;
      cl_mem scalars = nullptr, counts = nullptr;
      size_t groups = 1;       // its work-groups of one item (kCpuChainSpread)
      int64_t cacheBytes = 0;  // its launches'
    };
    std::vector<Chain> chains;
    std::vector<size_t> steps;
    std::vector<size_t> offsets;             // each given input's upload region, then the cache length's
    std::vector<size_t> hostOffsets;         // hostUploads_' regions
    std::vector<std::pair<size_t, size_t>> writes;
    int64_t cacheBytes = 0;
    // The launches, recorded on the first replay; two, taken in turn, so that a replay can
    // be enqueued while the last one runs (a command buffer cannot be enqueued twice at once).
    cl_command_buffer_khr commands[2] = {nullptr, nullptr};
    int turn = 0;
    const CommandBufferApi* api = nullptr;     // what made them: released through it, even once turned off
  };
  Replay replay_;
  std::vector<std::pair<size_t, size_t>> launches_;    // this run's (node, site)
  std::vector<std::pair<size_t, size_t>> lastWrites_;  // flushUploads' ranges
  static constexpr size_t kNotUploaded = static_cast<size_t>(-1);
  bool tryReplay(const std::vector<Tensor>& inputs, const std::vector<Carry>& carried);
  void evaluateHostNodes();  // hostRun_, into hostValues_ (whose inputs are set)
  void recordReplay(const std::vector<Tensor>& inputs, const std::vector<Carry>& carried, int64_t kvPast, int64_t kvTotal,
                    int64_t bucket);
  void dropReplay();
  void makeChains(Replay& r);  // executor/chains.cpp
  void enqueueChain(const Replay::Chain& c);
  int64_t bucketOf(int64_t total) const { return std::min((total + kvPad_ - 1) / kvPad_ * kvPad_, kvCapacity_); }
  bool dry_ = false;
  bool pending_ = false;  // a run was enqueued and nothing has waited for it yet
  int64_t syncs_ = 0;
  double enqueueSeconds_ = 0, openclSeconds_ = 0;
  // Times an OpenCL call made during enqueue() into openclSeconds_.
  template <typename F>
  cl_int timed(F&& call) {
    const auto t0 = std::chrono::steady_clock::now();
    const cl_int err = call();
    openclSeconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return err;
  }
  int64_t replays_ = 0;
};

// Executor::explain()'s launches as tl-run --explain prints them: a header line, then a
// line a launch (node, op, kernel, grid as global/work-group sizes, why) in columns.
std::string explainText(const std::vector<Executor::LaunchNote>& notes);

// Executor::chains() as tl-run --explain prints them after the launches: a line a chain
// (which launches, counted from 0, one kernel runs in turn, on how many tasks at once),
// "" when none.
std::string chainsText(const Executor& ex);

// Executor::profile() as tl-run --profile and tl-bench --profile print it: device time per
// op and kernel variant, longest first, with what their nodes move and compute at the run's
// shapes (the op table's cost) as GB/s and GFLOP/s over that time.
std::string profileText(const Executor& ex);

// How a device runs prefill GEMMs (the matmul family's rows, runtime/lower/matmul.cpp), as
// tl-run --list-devices prints it: a CPU's tasks; a GPU's tensor-core tiles where it passes
// their probe (probeTensorCores), else the portable tiles and why.
std::string prefillGemmPath(const Device& device);

}  // namespace tl
