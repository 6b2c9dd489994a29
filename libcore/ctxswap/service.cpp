#include "ctxswap/service.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <type_traits>

#include "cli/error.h"
#include "text/tokenizer.h"

namespace tl {

namespace {

constexpr size_t kMaxRequest = size_t{1} << 20;

sockaddr_un socketAddress(const std::string& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof a.sun_path)
    throw Error("the socket path must be 1 to " + std::to_string(sizeof a.sun_path - 1) + " bytes: " + path, ExitCode::Usage);
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  return a;
}

struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

bool writeAll(int fd, const std::string& s) {
  for (size_t at = 0; at < s.size();) {
    const ssize_t n = ::send(fd, s.data() + at, s.size() - at, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    at += static_cast<size_t>(n);
  }
  return true;
}

std::string counts(const std::map<int, int64_t>& byBits) {
  std::string s;
  for (auto it = byBits.rbegin(); it != byBits.rend(); ++it)
    s += (s.empty() ? "" : " ") + std::to_string(it->first) + ":" + std::to_string(it->second);
  return s;
}

// The service's member for a setting: its flag's name with '_' for '-'.
std::string memberName(const char* flag) {
  std::string k = flag;
  for (char& c : k)
    if (c == '-') c = '_';
  return k;
}

}  // namespace

void writeSampling(JsonWriter& w, const SamplingOptions& s) {
  for (const auto& setting : samplingSettings()) {
    const std::string k = memberName(setting.name);
    std::visit(
        [&](auto member) {
          if constexpr (std::is_same_v<decltype(s.*member), const float&>) w.real(k, s.*member);
          else w.num(k, static_cast<int64_t>(s.*member));
        },
        setting.member);
  }
}

SamplingOptions readSampling(const JsonLine& r) {
  SamplingOptions s;
  for (const auto& setting : samplingSettings()) {
    const std::string k = memberName(setting.name);
    if (!r.has(k)) continue;
    std::visit(
        [&](auto member) {
          using T = std::remove_reference_t<decltype(s.*member)>;
          if constexpr (std::is_same_v<T, float>) {
            if (!r.ints.count(k) && !r.reals.count(k)) throw Error("'" + k + "' must be a number");
            s.*member = static_cast<float>(r.number(k, 0));
          } else {
            auto it = r.ints.find(k);
            if (it == r.ints.end()) throw Error("'" + k + "' must be an integer");
            if (std::is_unsigned_v<T> && it->second < 0) throw Error("'" + k + "' must not be negative");
            s.*member = static_cast<T>(it->second);
          }
        },
        setting.member);
  }
  (void)Sampler(s);  // refused here, before the call loads its context
  return s;
}

namespace {

// A request line, parsed: its members, and the texts' tokens.
struct Request {
  JsonLine r;
  std::string verb, app;
  const Tokenizer* tokenizer;
  Request(const std::string& owner, const std::string& line, const Tokenizer* t) : r(parseJsonLine(line)), tokenizer(t) {
    verb = text("verb");
    app = owner + "/app:" + text("app");
    for (const auto& k : {"id", "n", "seed"})
      if (r.ints.count(k) && r.ints.at(k) < 0) throw Error(std::string("'") + k + "' must not be negative");
  }
  std::string text(const char* k) const {
    auto it = r.strings.find(k);
    return it == r.strings.end() ? std::string() : it->second;
  }
  int64_t number(const char* k, bool required, int64_t fallback) const {
    auto it = r.ints.find(k);
    if (it != r.ints.end()) return it->second;
    if (required) throw Error(std::string("the request needs an integer '") + k + "'");
    return fallback;
  }
  // A text's tokens: the tokenizer's (its special tokens only for a context's start), else bytes.
  std::vector<int64_t> tokens(const std::string& t, bool start) const {
    if (!tokenizer) return byteTokens(t);
    const auto ids = tokenizer->encode(t, start);
    return std::vector<int64_t>(ids.begin(), ids.end());
  }
};

// A call's reply as lines: a token's (with the text it adds, through a tokenizer), the end's.
struct ReplyLines {
  std::unique_ptr<TextStream> stream;  // the reply's text, the prompt its context
  ReplyLines(const Tokenizer* tokenizer, const std::vector<int64_t>& prompt) {
    if (tokenizer) stream = std::make_unique<TextStream>(*tokenizer, std::vector<int32_t>(prompt.begin(), prompt.end()), true);
  }
  std::string token(int64_t t) {
    JsonWriter w;
    w.num("token", t);
    if (stream) w.str("text", stream->push(static_cast<int32_t>(t)));
    return w.line();
  }
  std::string done(const CallResult& c) {
    JsonWriter w;
    if (stream) w.str("text", stream->finish());
    if (c.drafted) w.num("drafted", c.drafted).num("taken", c.accepted);  // (a speculative call's)
    return w.flag("done", true)
        .num("switch_us", static_cast<int64_t>(c.load.seconds * 1e6 + 0.5))
        .num("in_memory", c.load.inMemory)
        .num("read", c.load.read)
        .num("recomputed", c.load.recomputed)
        .line();
  }
};

std::string errorLine(const std::string& message) { return JsonWriter().str("error", message).line(); }

// The verbs but a batched call: answered at once.
void answerNow(ContextStore& store, const Request& q, const std::function<void(const std::string&)>& send) {
  if (q.verb == "new") {
    send(JsonWriter().num("id", static_cast<int64_t>(store.create(q.app, q.tokens(q.text("system"), true)))).line());
  } else if (q.verb == "call") {
    const SamplingOptions s = readSampling(q.r);
    const auto prompt = q.tokens(q.text("prompt"), false);
    ReplyLines reply(q.tokenizer, prompt);
    const CallResult c = store.call(static_cast<uint64_t>(q.number("id", true, 0)), q.app, prompt, q.number("n", false, 16),
                                    [&](int64_t t) { send(reply.token(t)); }, s);
    send(reply.done(c));
  } else if (q.verb == "del") {
    const int64_t id = q.number("id", true, 0);
    store.remove(static_cast<uint64_t>(id), q.app);
    send(JsonWriter().num("deleted", id).line());
  } else if (q.verb == "ls") {
    for (const auto& i : store.list())
      if (i.owner == q.app)
        send(JsonWriter()
                 .num("id", static_cast<int64_t>(i.id))
                 .num("tokens", i.tokens)
                 .str("memory", counts(i.inMemory))
                 .str("disk", counts(i.onDisk))
                 .line());
    send(JsonWriter().flag("done", true).line());
  } else if (q.verb == "stats") {
    send(JsonWriter()
             .num("contexts", store.contexts())
             .num("memory", static_cast<int64_t>(store.memoryUsed()))
             .num("budget", static_cast<int64_t>(store.budget()))
             .num("peak", static_cast<int64_t>(store.peakMemory()))
             .num("refused_writes", store.refusedWrites())
             .line());
  } else {
    throw Error("unknown verb '" + q.verb + "' (new, call, del, ls, stats)");
  }
}

}  // namespace

void answer(ContextStore& store, const Tokenizer* tokenizer, const std::string& owner, const std::string& line,
            const std::function<void(const std::string&)>& send) {
  try {
    answerNow(store, Request(owner, line, tokenizer), send);
  } catch (const std::exception& e) {  // tl::Error, and whatever else a request runs into: the service goes on
    send(errorLine(e.what()));
  }
}

void serve(ContextStore& store, const Tokenizer* tokenizer, const std::string& socketPath, const std::atomic<bool>& stop) {
  const sockaddr_un addr = socketAddress(socketPath);
  {
    Fd probe{::socket(AF_UNIX, SOCK_STREAM, 0)};
    if (::connect(probe.fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0)
      throw Error("a service is already listening there");
  }
  ::unlink(socketPath.c_str());  // a stale socket of a service that died
  Fd listener{::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0)};
  if (listener.fd < 0) throw Error(std::string("socket: ") + std::strerror(errno), ExitCode::BadInput);
  const mode_t old = ::umask(0177);  // the socket is created owner-only: no window with wider rights
  const int bound = ::bind(listener.fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
  ::umask(old);
  if (bound != 0 || ::listen(listener.fd, 64) != 0)
    throw Error(std::string("cannot listen there: ") + std::strerror(errno));
  // Connections whose request line is still coming (read without blocking, so that a slow
  // client holds up no one), and the batched calls under way, by handle.
  struct Reading {
    std::unique_ptr<Fd> fd;
    std::string owner, line;
    std::chrono::steady_clock::time_point deadline;
  };
  struct Calling {
    std::unique_ptr<Fd> fd;
    ReplyLines reply;
  };
  std::vector<Reading> reading;
  std::map<uint64_t, Calling> calls;
  const auto sendTo = [](int fd) { return [fd](const std::string& s) { writeAll(fd, s + "\n"); }; };
  // A whole request line: answered, or (a batched call) queued in the store.
  const auto dispatch = [&](Reading& c) {
    const auto send = sendTo(c.fd->fd);
    try {
      const Request q(c.owner, c.line, tokenizer);
      if (q.verb != "call" || !store.maxBatch()) return answerNow(store, q, send);
      const SamplingOptions s = readSampling(q.r);
      const auto prompt = q.tokens(q.text("prompt"), false);
      const uint64_t h = store.begin(static_cast<uint64_t>(q.number("id", true, 0)), q.app, prompt, q.number("n", false, 16), s);
      calls.emplace(h, Calling{std::move(c.fd), ReplyLines(tokenizer, prompt)});
    } catch (const std::exception& e) {  // tl::Error, and whatever else a request runs into: the service goes on
      send(errorLine(e.what()));
    }
  };
  while (!stop.load()) {
    std::vector<pollfd> p{{listener.fd, POLLIN, 0}};
    for (const auto& c : reading) p.push_back({c.fd->fd, POLLIN, 0});
    ::poll(p.data(), p.size(), store.busy() ? 0 : 200);
    for (int fd; (fd = ::accept(listener.fd, nullptr, nullptr)) >= 0;) {
      std::unique_ptr<Fd> client(new Fd{fd});
      ucred cred{};
      socklen_t len = sizeof cred;
      if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) continue;
      reading.push_back({std::move(client), "uid:" + std::to_string(cred.uid), "",
                         std::chrono::steady_clock::now() + std::chrono::seconds(10)});
    }
    for (auto it = reading.begin(); it != reading.end();) {
      char buf[4096];
      bool closed = false, whole = false;
      for (;;) {
        const ssize_t n = ::recv(it->fd->fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR) continue;
        if (n == 0) closed = true;
        if (n <= 0) break;
        it->line.append(buf, static_cast<size_t>(n));
        if (const size_t nl = it->line.find('\n'); nl != std::string::npos) {
          it->line.resize(nl);
          whole = true;
          break;
        }
        if (it->line.size() > kMaxRequest) break;
      }
      if (whole) {
        dispatch(*it);
      } else if (it->line.size() > kMaxRequest) {
        sendTo(it->fd->fd)(errorLine("the request is over 1 MiB"));
      } else if (closed || std::chrono::steady_clock::now() > it->deadline) {
        sendTo(it->fd->fd)(errorLine("no request line (one JSON object, then a newline)"));
      } else {
        ++it;
        continue;
      }
      it = reading.erase(it);
    }
    if (!store.busy()) continue;
    for (auto& e : store.advance()) {
      auto c = calls.find(e.call);
      if (c == calls.end()) continue;
      const auto send = sendTo(c->second.fd->fd);
      if (!e.done) {
        send(c->second.reply.token(e.token));
        continue;
      }
      send(e.error.empty() ? c->second.reply.done(e.result) : errorLine(e.error));
      calls.erase(c);
    }
  }
  ::unlink(socketPath.c_str());
}

void request(const std::string& socketPath, const std::string& line, const std::function<void(const JsonLine&)>& onLine) {
  const sockaddr_un addr = socketAddress(socketPath);
  Fd fd{::socket(AF_UNIX, SOCK_STREAM, 0)};
  if (fd.fd < 0 || ::connect(fd.fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0)
    throw Error(std::string("no service there (tl-ctxswap serve): ") + std::strerror(errno));
  if (!writeAll(fd.fd, line + "\n")) throw Error("the service closed the connection");
  std::string pending;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::recv(fd.fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    pending.append(buf, static_cast<size_t>(n));
    for (size_t nl; (nl = pending.find('\n')) != std::string::npos;) {
      onLine(parseJsonLine(pending.substr(0, nl)));
      pending.erase(0, nl + 1);
    }
  }
  if (!pending.empty()) throw Error("the service's answer ended mid-line");
}

}  // namespace tl
