// tl-fuse: rewrite a model's patterns into fused ops of the `tl` domain, as a stage of
// its own (plain, shaped or quantized models; a fused model can still be quantized).
//
//   tl-fuse model.onnx -o fused.onnx                   every pass, in order
//   tl-fuse model.onnx --passes rmsnorm -o fused.onnx  the named passes, in the order given
//   tl-fuse model.onnx --emit text [-v]                what each pass matched, node counts before/after
//   tl-fuse --list-passes
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "cli/error.h"
#include "cli/tool.h"
#include "fuse/fuse.h"
#include "onnx/model_io.h"

int main(int argc, char** argv) {
  tl::Tool tool("tl-fuse",
                "tl-fuse: rewrite an ONNX model's patterns into fused tl-domain ops (docs/ops.md) that\n"
                "tl-run runs in fewer kernels. Patterns are proven on the graph (shapes, constants by\n"
                "value); one that cannot be proven is left alone, and -v says why.\n\n"
                "  tl-fuse model.onnx -o fused.onnx\n"
                "  tl-fuse model.onnx --passes rmsnorm,dead-nodes -o fused.onnx\n"
                "  tl-fuse model.onnx --emit text -v\n"
                "  tl-fuse --list-passes\n");
  std::string passes;
  bool list = false, verbose = false;
  auto& app = tool.app();
  app.add_option("--passes", passes, "comma-separated passes to run, in that order (default: all; see --list-passes)");
  app.add_flag("--list-passes", list, "list the passes with what each rewrites, and exit");
  app.add_flag("-v,--verbose", verbose, "name each near miss (a pattern's start left alone) and why, on stderr");
  return tool.run(argc, argv, [&] {
    if (list) {
      for (const auto& p : tl::fusePasses()) std::cout << p.name << "\t" << p.summary << "\n";
      return;
    }
    std::vector<std::string> names;
    for (const auto& s : tl::splitCommas(passes))
      if (!s.empty()) names.push_back(s);
    tl::Model model = tl::loadModel(tool.input());
    const auto before = tl::opCounts(model.proto.graph());
    const auto results = tl::runFusePasses(model, names);
    std::string report;
    for (const auto& r : results) {
      report += r.pass + ": " + std::to_string(r.rewrites) + " " + r.counts +
                (r.nearMisses.empty() ? "" : ", " + std::to_string(r.nearMisses.size()) + " near misses") + "\n";
      if (verbose)
        for (const auto& m : r.nearMisses) report += "  near miss: " + m + "\n";
    }
    if (tool.emit() == tl::Emit::Text) {
      const auto after = tl::opCounts(model.proto.graph());
      std::map<std::string, std::pair<int, int>> rows;
      for (const auto& [op, n] : before) rows[op].first = n;
      for (const auto& [op, n] : after) rows[op].second = n;
      int b = 0, a = 0;
      std::string table = "| op | before | after |\n|---|---:|---:|\n";
      for (const auto& [op, n] : rows) {
        table += "| " + op + " | " + std::to_string(n.first) + " | " + std::to_string(n.second) + " |\n";
        b += n.first;
        a += n.second;
      }
      table += "| all | " + std::to_string(b) + " | " + std::to_string(a) + " |\n";
      tool.writeOutput("tl-fuse: " + model.displayName + "\n" + report + "\n" + table, false);
      return;
    }
    std::fputs(report.c_str(), stderr);
    const bool toFile = tool.output() != "-";
    const std::filesystem::path outDir =
        toFile ? std::filesystem::absolute(tool.output()).parent_path() : std::filesystem::current_path();
    // A model that keeps its weights outside keeps the merged ones there too (protobuf stops at 2 GiB).
    constexpr size_t kInlineLimit = 1 << 20;
    const auto& inits = model.proto.graph().initializer();
    const bool big = std::any_of(inits.begin(), inits.end(), [&](const auto& t) { return t.raw_data().size() >= kInlineLimit; });
    if (toFile && big && tl::hasExternalData(model.proto)) {
      const auto data = tl::externalDataBeside(tool.output(), model);
      tl::moveToExternalData(model, *data, kInlineLimit);
      data->commit();
    }
    tool.writeOutput(tl::serializeModel(model, outDir), true);
  });
}
