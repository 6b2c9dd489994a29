// tl-bench's output: the probe, the model rows and the kernel table as one report in
// llama-bench's formats (md for people, csv/json/jsonl for CI), the roofline picture,
// and the reading of peers' rows (jsonl in the same schema, docs/tl-bench.md).
//
// Every row is judged against the probe of the same run: achieved GB/s and FLOP/s are
// the row's model-derived bytes and FLOPs per token times its tokens per second, and
// the percentages divide them by the probe's bandwidth and fp32 peak.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "bench/kernel_table.h"
#include "bench/lm_bench.h"
#include "bench/probe.h"

namespace tl {

enum class BenchFormat { Md, Csv, Json, Jsonl };
std::optional<BenchFormat> benchFormatNamed(const std::string& name);  // md, csv, json, jsonl

struct BenchReport {
  std::optional<DeviceProbe> probe;
  std::vector<BenchRow> rows;
  std::optional<KernelTable> kernels;
  std::optional<KernelTable> gemm;  // the prefill GEMM table (tl-bench --kernels)
};

std::string renderReport(const BenchReport& report, BenchFormat format);

// An SVG roofline: the probe's bandwidth and fp32 ceilings on log-log axes, and each
// model row and kernel as a point (FLOP per byte, achieved GFLOP/s).
std::string rooflineSvg(const BenchReport& report);

// Rows a peer printed as jsonl (one object per line; blank lines skipped). Throws
// tl::Error naming `source` and the line for anything else.
std::vector<BenchRow> parseRows(const std::string& jsonl, const std::string& source);

}  // namespace tl
