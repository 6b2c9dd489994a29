// Speculative decoding's flags (tl-run --generate, tl-bench, tl-ctxswap serve): one
// spelling and one check for the three tools.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "cli/error.h"
#include "lm/speculative.h"

namespace tl {

struct SpeculativeFlags {
  std::string draft;  // --draft MODEL
  bool lookup = false;
  int64_t draftMax = 3;
  bool any() const { return lookup || !draft.empty(); }
};

// Adds --draft, --prompt-lookup and --draft-max to app; `what` is what they make
// speculative in this tool ("decoding", "calls", ...).
inline void addSpeculativeFlags(CLI::App& app, SpeculativeFlags& f, const std::string& what) {
  app.add_option("--draft", f.draft,
                 "speculative " + what + " with a draft model: a smaller or lower-bit model of the same vocabulary\n"
                 "(a q3h quantization of this one), planned by tl-plan like it; greedy output stays the model's own");
  app.add_flag("--prompt-lookup", f.lookup,
               "speculative " + what + " with drafts from the text itself: what followed the last 1-3 tokens\n"
               "where they came before (no second model)");
  app.add_option("--draft-max", f.draftMax,
                 "tokens a speculative step drafts (1-7), checked in one step of up to 8 rows: no more than the\n"
                 "device's decode kernels take (8 on CPUs, 4 on GPUs), so that each row's logits are what a step\n"
                 "of one would give")
      ->capture_default_str();
}

// Throws tl::Error (usage) for --draft-max out of range where speculation is asked for,
// and for both drafters where the tool takes one.
inline void checkSpeculativeFlags(const SpeculativeFlags& f, bool oneDrafter) {
  if (oneDrafter && f.lookup && !f.draft.empty()) throw Error("give one of --draft MODEL, --prompt-lookup", ExitCode::Usage);
  if (f.any()) checkDraftMax(f.draftMax);
}

}  // namespace tl
