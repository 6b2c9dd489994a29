// Helpers for tests that run the tools as a user would and for the shared models.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "onnx/model_io.h"
#include "runtime/executor.h"
#include "tensor/tensor.h"

namespace tl::test {

struct RunResult {
  int exitCode = -1;
  std::string out;
  std::string err;
};

// Runs `TL_BIN_DIR/<tool> <args>` through the shell in `cwd` (default: the current
// directory); stdinFile "" means no input.
RunResult runTool(const std::string& tool, const std::string& args, const std::string& stdinFile = "",
                  const std::filesystem::path& cwd = {});

std::filesystem::path sharedModels();
std::filesystem::path sourceDir();
// Model folders (with model.onnx and test_data_set_*): the shared TorchScript exports
// and the dynamo exports under tests/models/dynamo.
std::vector<std::filesystem::path> modelDirs();
// A gtest-safe name for a model folder: "llama_past", "dynamo_llama_past".
std::string modelTestName(const std::filesystem::path& modelDir);
std::filesystem::path tempDir(const std::string& name);
std::string readFile(const std::filesystem::path& p);
void writeFile(const std::filesystem::path& p, const std::string& data);
// The lines of `text`, without their '\n' (a last line may lack one).
std::vector<std::string> lines(const std::string& text);
// `text` against tests/golden/`file` (written instead under TL_UPDATE_GOLDEN=1). A
// difference fails the test with its first differing line, under the last "== " title
// before it, and the path where the whole text was written to diff against the file.
void expectGolden(const std::string& file, const std::string& text);

// A tokenizer.json whose ids are the bytes: a byte-level BPE with no merges (GPT-2's
// byte characters, ByteLevel pre-tokenizer and decoder), so that over the bundled
// bytellama a tokenizer's path must give what the byte path gives.
std::string byteLevelTokenizerJson();

// `src` (an exported causal LM) with a vocabulary of `vocab` ids: its token embedding
// (the initializer input_ids gathers from) and the weight of the MatMul that makes
// `logits` replaced by random ones of that many rows and columns, the logits' declared
// size changed to match. The model of a family's vocabulary a tokenizer needs, at the
// test models' small dims. Returns DIR/model.onnx.
std::filesystem::path writeVocabModel(const std::filesystem::path& src, const std::filesystem::path& dir, int64_t vocab);

// A causal LM small enough to cost by hand: input_ids [1, N] gathers rows of a 10 x 8
// table, logits = h W (W 8 x 10), and one cache input past_key_values.0.key
// [1, 2, past, 4] extended by h's rows into present.0.key [1, 2, past + N, 4]
// (Reshape by a constant [1, -1, 2, 4], Transpose, Concat). Returns its path.
std::filesystem::path writeTinyCacheModel(const std::filesystem::path& dir);

// A model of one node (domain `tl` unless `domain` says otherwise): float inputs by name
// and dims (digits a size, else a symbol), one float output "y"; epsilon when > 0.
Model oneNodeModel(const std::string& op, const std::vector<std::pair<std::string, std::vector<std::string>>>& inputs,
                   float epsilon = 0, const std::string& domain = "tl");
void setAttr(Model& m, const char* name, float f);    // on the model's first node
void setAttr(Model& m, const char* name, int64_t i);
void setAttr(Model& m, const char* name, const std::vector<int64_t>& ints);
void setAttr(Model& m, const char* name, const std::string& s);
Tensor floats(const char* name, const std::vector<float>& v, std::vector<int64_t> dims);
// A float initializer of `dims` holding v's `count` values.
void addInitializer(Model& model, const char* name, const std::vector<int64_t>& dims, const float* v, size_t count);
// Runs a model on the default device in both kernel families, and in the GPU family again
// as a GPU with 32 KB of local memory gets it, and hands each executor to `check`.
void onBothFamilies(Model& m, const std::function<void(Executor&, bool)>& check);
// Runs a model on the default device in the GPU family with the tensor-core kernels built
// (their PTX emulated, Device::setMmaEmulation, where the device is not NVIDIA's) and
// hands the executor to `check`: the tiles' arithmetic checked without an NVIDIA device.
void onEmulatedTensorCores(Model& m, const std::function<void(Executor&, bool)>& check);
// Whether any of `launches` rounds A before its products: the tensor-core tiles (an
// `_mma_` kernel: fp16 operands) or the int8 rows (`_i8_`).
bool roundsActivations(const std::vector<Executor::LaunchNote>& launches);
// The error an Executor of `m` on the default device is refused with (its kernels are
// looked up as it is made), or "" when it is made.
std::string refusalOf(Model& m);
// W4A8's activations as its kernels take them: each of `count` rows of K values (in a
// row after another) rounded to the int8 grid of its largest magnitude / 127; with
// `block`, each run of `block` values of a row on its own grid (the int8 tensor-core
// tiles' 128, NVIDIA's one-row int8 GEMVs' 32).
void roundRowsToInt8(float* rows, int64_t count, int64_t K, int64_t block = 0);

}  // namespace tl::test
