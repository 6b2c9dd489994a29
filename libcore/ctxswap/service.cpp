#include "ctxswap/service.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
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

void answer(ContextStore& store, const Tokenizer* tokenizer, const std::string& owner, const std::string& line,
            const std::function<void(const std::string&)>& send) {
  try {
    const JsonLine r = parseJsonLine(line);
    const auto text = [&](const char* k) {
      auto it = r.strings.find(k);
      return it == r.strings.end() ? std::string() : it->second;
    };
    const auto number = [&](const char* k, bool required, int64_t fallback) {
      auto it = r.ints.find(k);
      if (it != r.ints.end()) return it->second;
      if (required) throw Error(std::string("the request needs an integer '") + k + "'");
      return fallback;
    };
    const std::string verb = text("verb"), app = owner + "/app:" + text("app");
    for (const auto& k : {"id", "n", "seed"})
      if (r.ints.count(k) && r.ints.at(k) < 0) throw Error(std::string("'") + k + "' must not be negative");
    // A text's tokens: the tokenizer's (its special tokens only for a context's start), else bytes.
    const auto tokens = [&](const std::string& t, bool start) {
      if (!tokenizer) return byteTokens(t);
      const auto ids = tokenizer->encode(t, start);
      return std::vector<int64_t>(ids.begin(), ids.end());
    };
    if (verb == "new") {
      send(JsonWriter().num("id", static_cast<int64_t>(store.create(app, tokens(text("system"), true)))).line());
    } else if (verb == "call") {
      const SamplingOptions s = readSampling(r);
      const auto prompt = tokens(text("prompt"), false);
      std::unique_ptr<TextStream> stream;  // the reply's text, the prompt its context
      if (tokenizer) stream = std::make_unique<TextStream>(*tokenizer, std::vector<int32_t>(prompt.begin(), prompt.end()), true);
      const CallResult c = store.call(static_cast<uint64_t>(number("id", true, 0)), app, prompt, number("n", false, 16),
                                      [&](int64_t t) {
                                        JsonWriter w;
                                        w.num("token", t);
                                        if (stream) w.str("text", stream->push(static_cast<int32_t>(t)));
                                        send(w.line());
                                      },
                                      s);
      JsonWriter done;
      if (stream) done.str("text", stream->finish());
      send(done.flag("done", true)
               .num("switch_us", static_cast<int64_t>(c.load.seconds * 1e6 + 0.5))
               .num("in_memory", c.load.inMemory)
               .num("read", c.load.read)
               .num("recomputed", c.load.recomputed)
               .line());
    } else if (verb == "del") {
      const int64_t id = number("id", true, 0);
      store.remove(static_cast<uint64_t>(id), app);
      send(JsonWriter().num("deleted", id).line());
    } else if (verb == "ls") {
      for (const auto& i : store.list())
        if (i.owner == app)
          send(JsonWriter()
                   .num("id", static_cast<int64_t>(i.id))
                   .num("tokens", i.tokens)
                   .str("memory", counts(i.inMemory))
                   .str("disk", counts(i.onDisk))
                   .line());
      send(JsonWriter().flag("done", true).line());
    } else if (verb == "stats") {
      send(JsonWriter()
               .num("contexts", store.contexts())
               .num("memory", static_cast<int64_t>(store.memoryUsed()))
               .num("budget", static_cast<int64_t>(store.budget()))
               .num("peak", static_cast<int64_t>(store.peakMemory()))
               .num("refused_writes", store.refusedWrites())
               .line());
    } else {
      throw Error("unknown verb '" + verb + "' (new, call, del, ls, stats)");
    }
  } catch (const std::exception& e) {  // tl::Error, and whatever else a request runs into: the service goes on
    send(JsonWriter().str("error", e.what()).line());
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
  Fd listener{::socket(AF_UNIX, SOCK_STREAM, 0)};
  if (listener.fd < 0) throw Error(std::string("socket: ") + std::strerror(errno), ExitCode::BadInput);
  const mode_t old = ::umask(0177);  // the socket is created owner-only: no window with wider rights
  const int bound = ::bind(listener.fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
  ::umask(old);
  if (bound != 0 || ::listen(listener.fd, 64) != 0)
    throw Error(std::string("cannot listen there: ") + std::strerror(errno));
  while (!stop.load()) {
    pollfd p{listener.fd, POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    Fd client{::accept(listener.fd, nullptr, nullptr)};
    if (client.fd < 0) continue;
    ucred cred{};
    socklen_t len = sizeof cred;
    if (::getsockopt(client.fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) continue;
    const timeval limit{10, 0};
    ::setsockopt(client.fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
    std::string line;
    char buf[4096];
    bool whole = false;
    while (line.size() <= kMaxRequest) {
      const ssize_t n = ::recv(client.fd, buf, sizeof buf, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      line.append(buf, static_cast<size_t>(n));
      if (const size_t nl = line.find('\n'); nl != std::string::npos) {
        line.resize(nl);
        whole = true;
        break;
      }
    }
    const auto send = [&](const std::string& s) { writeAll(client.fd, s + "\n"); };
    if (!whole) {
      send(JsonWriter().str("error", line.size() > kMaxRequest ? "the request is over 1 MiB" : "no request line (one JSON object, then a newline)").line());
      continue;
    }
    answer(store, tokenizer, "uid:" + std::to_string(cred.uid), line, send);
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
