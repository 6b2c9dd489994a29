// tl-run: execute ONNX models on an OpenCL device.
//
//   tl-run --list-devices                        devices and their detected capabilities
//   tl-run model.onnx --check DIR                run every DIR/test_data_set_*, compare outputs
//   tl-run model.onnx --check DIR --profile      ... and print per-op device time
#include <cstdio>
#include <iostream>
#include <map>

#include "check/reference_check.h"
#include "cli/error.h"
#include "cli/tool.h"
#include "graph/graph.h"
#include "onnx/model_io.h"
#include "runtime/device.h"
#include "runtime/executor.h"
#include "shape/shape_inference.h"

namespace {

void printProfile(const std::vector<tl::OpTime>& times) {
  std::map<std::string, std::pair<double, int>> byOp;
  double total = 0;
  for (const auto& t : times) {
    byOp[t.op].first += t.ms;
    byOp[t.op].second += 1;
    total += t.ms;
  }
  std::vector<std::pair<std::string, std::pair<double, int>>> rows(byOp.begin(), byOp.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  std::fprintf(stderr, "profile: %zu kernels, %.3f ms device time\n", times.size(), total);
  std::fprintf(stderr, "  %-22s %8s %10s %7s\n", "op", "kernels", "ms", "share");
  for (const auto& [op, v] : rows)
    std::fprintf(stderr, "  %-22s %8d %10.3f %6.1f%%\n", op.c_str(), v.second, v.first, total > 0 ? 100 * v.first / total : 0);
}

}  // namespace

int main(int argc, char** argv) {
  tl::Tool tool("tl-run",
                "tl-run: execute an ONNX model (plain, or any tl stage's artifact) on an OpenCL device.\n"
                "Shapes come from tl-shape's analysis (run here if the model has none): every shape\n"
                "expression is evaluated once per run and all tensor ops are enqueued without syncing.\n\n"
                "  tl-run --list-devices\n"
                "  tl-run model.onnx --check DIR [--atol 1e-4 --rtol 1e-3] [--profile]\n");
  std::string device, checkDir;
  bool listDevices = false, profile = false;
  double atol = 1e-4, rtol = 1e-3;
  auto& app = tool.app();
  app.add_flag("--list-devices", listDevices, "list OpenCL devices with their capabilities, and exit");
  app.add_option("--device", device, "device by index (see --list-devices) or name substring; default: first GPU, else CPU");
  app.add_option("--check", checkDir, "run every DIR/test_data_set_* and compare with its outputs");
  app.add_option("--atol", atol, "absolute tolerance for --check")->capture_default_str();
  app.add_option("--rtol", rtol, "relative tolerance for --check")->capture_default_str();
  app.add_flag("--profile", profile, "print device time per op (OpenCL profiling events)");
  return tool.run(argc, argv, [&] {
    if (listDevices) {
      auto all = tl::listDevices();
      if (all.empty()) throw tl::Error("no OpenCL device found", tl::ExitCode::Device);
      for (size_t i = 0; i < all.size(); ++i) std::cout << i << ": " << tl::describe(all[i]) << "\n";
      return;
    }
    if (checkDir.empty()) throw tl::Error("nothing to do: give --check DIR (or --list-devices)", tl::ExitCode::Usage);
    tl::Model model = tl::loadModel(tool.input());
    tl::Graph graph(model.proto.graph());
    tl::ShapeAnalysis analysis = tl::inferShapes(model, graph);
    auto sets = tl::loadDataSets(checkDir);
    tl::Device dev(tl::selectDevice(device), profile);
    std::fprintf(stderr, "device: %s / %s\n", dev.info().platformName.c_str(), dev.info().name.c_str());
    tl::Executor ex(dev, model, graph, analysis);
    bool allPass = true;
    for (const auto& set : sets) {
      std::vector<std::string> names;
      for (const auto& t : set.outputs) names.push_back(t.name);
      auto got = ex.run(set.inputs, names);
      std::printf("%s:\n", set.dir.filename().c_str());
      for (size_t j = 0; j < got.size(); ++j) {
        auto c = tl::compareTensors(got[j], set.outputs[j], atol, rtol);
        allPass = allPass && c.pass();
        if (!c.shapeMatches) {
          std::printf("  %-28s FAIL shape %s vs reference %s\n", c.name.c_str(),
                      tl::str(std::vector<tl::SymExpr>(got[j].dims.begin(), got[j].dims.end())).c_str(),
                      tl::str(std::vector<tl::SymExpr>(set.outputs[j].dims.begin(), set.outputs[j].dims.end())).c_str());
          continue;
        }
        std::printf("  %-28s %s  max abs %.3g  max rel %.3g  (%lld of %lld over atol %g + rtol %g)\n", c.name.c_str(),
                    c.pass() ? "PASS" : "FAIL", c.maxAbs, c.maxRel, static_cast<long long>(c.mismatches),
                    static_cast<long long>(set.outputs[j].numel()), atol, rtol);
      }
      if (profile) printProfile(ex.profile());
    }
    std::printf("%s\n", allPass ? "PASSED" : "FAILED");
    if (!allPass) throw tl::Error("outputs differ from the reference beyond the tolerances");
  });
}
