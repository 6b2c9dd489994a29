// tl-ctxswap's service (LLMS Table 1, issue 11): a ContextStore behind a Unix socket. One
// request a connection: the client writes one JSON line (json_line.h), the service
// answers with one or more lines and closes. docs/tl-ctxswap.md has the protocol.
#pragma once

#include <atomic>
#include <functional>
#include <string>

#include "ctxswap/context_store.h"
#include "ctxswap/json_line.h"

namespace tl {

class Tokenizer;

// Answers one request line from `owner` (the peer's identity: "uid:N") through `send`
// (one line each, no newline). The request's "app" member names the app within that
// owner, so two apps of one user keep their contexts apart:
//   {"verb":"new","system":TEXT}                -> {"id":N}
//   {"verb":"call","id":N,"prompt":TEXT,"n":K}  -> {"token":T} for each token, then
//     (optional: the sampling settings, samplingSettings' names with '_' for '-': "temperature",
//     "top_k", "mirostat_tau", "fsd_alpha", "seed", ...: sampler.h; greedy by default)
//                                                 {"done":true,"switch_us":X,"in_memory":A,"read":B,"recomputed":C}
//   {"verb":"del","id":N}                       -> {"deleted":N}
//   {"verb":"ls"}                               -> {"id":N,"tokens":T,"memory":"8:3 4:2","disk":"8:5"} a context
//                                                 of this app, then {"done":true}
//   {"verb":"stats"}                            -> {"contexts":N,"memory":B,"budget":B,"peak":B,"refused_writes":N}
// With a tokenizer, texts are its tokens (a context's system text with the tokenizer's
// special tokens, a call's prompt without) and each reply token's line also carries the
// text it adds ({"token":T,"text":S}: a character split across tokens comes whole with
// the token that ends it; what is still held at the end comes on the done line); without
// one, texts are bytes fed as tokens (a byte-level model). The contexts' logs are ids
// either way. Any error is one line, {"error":MESSAGE}, and the service goes on.
void answer(ContextStore& store, const Tokenizer* tokenizer, const std::string& owner, const std::string& line,
            const std::function<void(const std::string&)>& send);

// A call's sampling settings as members of a request, and back (absent members: defaults).
// readSampling throws tl::Error for a member of the wrong kind (a fraction where a count
// goes) or a value the Sampler refuses.
void writeSampling(JsonWriter& w, const SamplingOptions& s);
SamplingOptions readSampling(const JsonLine& r);

// Serves on `socketPath` until `stop` is true: the socket is created owner-only (0600); a
// live service already there is an error, a stale socket file is replaced and removed at
// the end. Requests over 1 MiB, or not a line within 10 s, get an error.
void serve(ContextStore& store, const Tokenizer* tokenizer, const std::string& socketPath, const std::atomic<bool>& stop);

// The client: sends one request, hands each answer line to onLine. Throws tl::Error when
// the service cannot be reached or an answer line is malformed (errors name no path: the
// caller knows it).
void request(const std::string& socketPath, const std::string& line, const std::function<void(const JsonLine&)>& onLine);

}  // namespace tl
