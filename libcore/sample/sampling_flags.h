// The sampling settings as command-line flags (tl-run --generate, tl-ctxswap call): one
// --NAME per samplingSettings() row, bound to a SamplingOptions.
#pragma once

#include <CLI/CLI.hpp>

#include "sample/sampler.h"

namespace tl {

// Adds the flags to app, their defaults shown; the Sampler checks the values.
inline void addSamplingFlags(CLI::App& app, SamplingOptions& s) {
  for (const auto& setting : samplingSettings())
    std::visit([&](auto member) { app.add_option(std::string("--") + setting.name, s.*member, setting.help)->capture_default_str(); },
               setting.member);
}

}  // namespace tl
