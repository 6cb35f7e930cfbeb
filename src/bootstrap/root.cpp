#include "bootstrap/root.hpp"

#include <unistd.h>

#include <asio.hpp>
#include <algorithm>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "bootstrap/allow.hpp"
#include "bootstrap/auth.hpp"
#include "bootstrap/listener.hpp"
#include "bootstrap/wire.hpp"
#include "util/log.hpp"

namespace nlccl::bootstrap {

namespace {

using asio::ip::tcp;
using Bytes = std::vector<uint8_t>;

/// Where a connection is in the handshake (wire.hpp): AuthStart, Challenge, Hello.
enum class Stage { New, Challenged, Joined };

/// One accepted connection. Lives in RootServer::conns_ until its socket is closed.
struct Conn {
  Conn(asio::io_context& io, tcp::socket s) : sock(std::move(s)), helloTimer(io) {}
  tcp::socket sock;
  asio::steady_timer helloTimer;  // the whole handshake must finish before it fires
  uint64_t id = 0;
  std::string peer;
  Stage stage = Stage::New;
  wire::Nonce rankNonce{}, rootNonce{};
  int rank = -1;  // world rank once the hello is accepted (stage Joined)
  bool goodbye = false;
  bool closed = false;
  uint8_t hdr[wire::kHeaderBytes];
  Bytes payload;
  std::deque<std::shared_ptr<Bytes>> outq;
};
using ConnPtr = std::shared_ptr<Conn>;

/// Contributions to one (group, seq) round.
struct Round {
  int32_t nranks = 0;
  wire::Op op = wire::Op::AllGather;
  int32_t root = 0;
  uint64_t bytes = 0;
  int32_t firstRank = 0;
  int count = 0;
  std::vector<std::optional<Bytes>> pieces;
  std::vector<uint64_t> conns;  // contributor connection ids, by rank in the group
  std::string error;            // set once the round failed; late arrivals get it too
};

class RootServer {
 public:
  RootServer(const Secret& secret, AllowList allow, int64_t helloTimeoutMs)
      : secret_(secret),
        allow_(std::move(allow)),
        helloTimeoutMs_(helloTimeoutMs),
        listener_(io_) {}

  Status listen(const Endpoint& want, Endpoint* got) {
    NLCHECK(listener_.listen(want, got));
    INFO(log::kBootstrap, "bootstrap root listening on %s, accepting ranks from %s",
         got->toString().c_str(), allow_.toString().c_str());
    return Status::Success;
  }

  void start() {
    running_ = true;
    listener_.start([this](tcp::socket sock) { onAccepted(std::move(sock)); });
    thread_ = std::thread([this] {
      try {
        io_.run();
      } catch (const std::exception& e) {
        WARN("bootstrap root: stopped on an exception: %s", e.what());
      }
      std::lock_guard<std::mutex> lock(statsMu_);
      running_ = false;
    });
  }

  /// Asks the root thread to close everything, then joins it.
  void stopAndJoin() {
    asio::post(io_, [this] { shutdown(); });
    if (thread_.joinable()) thread_.join();
  }
  void join() {
    if (thread_.joinable()) thread_.join();
  }
  bool finished() {
    std::lock_guard<std::mutex> lock(statsMu_);
    return !running_;
  }
  RootStats stats() {
    std::lock_guard<std::mutex> lock(statsMu_);
    RootStats s;
    s.running = running_;
    s.joined = joined_;
    s.live = live_;
    s.acceptFailures = listener_.acceptFailures();
    s.dropped = listener_.dropped();
    s.refusals = refusals_;
    return s;
  }

 private:
  void onAccepted(tcp::socket sock) {
    auto c = std::make_shared<Conn>(io_, std::move(sock));
    asio::error_code ignored;
    c->sock.set_option(tcp::no_delay(true), ignored);
    auto rep = c->sock.remote_endpoint(ignored);
    if (ignored) return;  // reset before we got to it: nobody to refuse (the socket closes)
    c->peer = rep.address().to_string() + ":" + std::to_string(rep.port());
    c->id = ++nextConnId_;
    conns_[c->id] = c;
    if (!allowed(rep.address()))
      return refuse(c, "address " + rep.address().to_string() + " is outside NLCCL_BOOTSTRAP_ALLOW");
    c->helloTimer.expires_after(std::chrono::milliseconds(helloTimeoutMs_));
    c->helloTimer.async_wait([this, c](const asio::error_code& tec) {
      if (!tec && c->rank < 0 && !c->closed)
        refuse(c, "no hello within " + std::to_string(helloTimeoutMs_) + " ms");
    });
    readHeader(c);
  }

  bool allowed(const asio::ip::address& a) const {
    if (a.is_v4()) return allow_.allows(false, a.to_v4().to_bytes().data());
    return allow_.allows(true, a.to_v6().to_bytes().data());
  }

  void readHeader(const ConnPtr& c) {
    asio::async_read(c->sock, asio::buffer(c->hdr), [this, c](const asio::error_code& ec, size_t n) {
      if (c->closed) return;
      if (ec) return onReadError(c, ec, n, wire::kHeaderBytes, "header");
      wire::Header h;
      std::string why;
      size_t limit = c->rank < 0 ? wire::kMaxHelloBytes : wire::kMaxMessageBytes;
      if (wire::parseHeader({c->hdr, sizeof(c->hdr)}, limit, &h, &why) != wire::Parse::Ok)
        return refuse(c, why);
      c->payload.resize(h.length);  // bounded by `limit`
      asio::async_read(c->sock, asio::buffer(c->payload),
                       [this, c, h](const asio::error_code& ec2, size_t n2) {
                         if (c->closed) return;
                         if (ec2) return onReadError(c, ec2, n2, h.length, "payload");
                         wire::Body body;
                         std::string why2;
                         if (!wire::parseBody(h, c->payload, &body, &why2)) return refuse(c, why2);
                         if (dispatch(c, h, body)) readHeader(c);
                       });
    });
  }

  void onReadError(const ConnPtr& c, const asio::error_code& ec, size_t got, size_t want,
                   const char* what) {
    if (ec == asio::error::eof && (got > 0 || std::string(what) == "payload")) {
      return refuse(c, "truncated message (connection closed after " + std::to_string(got) +
                           " of " + std::to_string(want) + " " + what + " bytes)");
    }
    if (c->rank < 0) {
      if (ec == asio::error::eof) return refuse(c, "connection closed before its hello");
      return refuse(c, "read error before hello: " + ec.message());
    }
    if (c->goodbye) return closeConn(c);
    rankLost(c, "rank " + std::to_string(c->rank) + " disconnected");
  }

  /// Returns false when the connection was closed (stop reading).
  bool dispatch(const ConnPtr& c, const wire::Header& h, const wire::Body& body) {
    if (c->stage == Stage::New) {
      if (h.type == wire::Type::AuthStart) return onAuthStart(c, std::get<wire::AuthStart>(body));
      refuse(c, "message type " + std::to_string(int(h.type)) + " before the handshake");
      return false;
    }
    if (c->stage == Stage::Challenged) {
      if (h.type == wire::Type::Hello) return onHello(c, std::get<wire::Hello>(body));
      refuse(c, "message type " + std::to_string(int(h.type)) + " where the hello belongs");
      return false;
    }
    switch (h.type) {
      case wire::Type::Gather:
        return onGather(c, h, std::get<wire::Gather>(body));
      case wire::Type::Query: {
        std::vector<int32_t> missing;
        int32_t n = 1;
        auto it = rounds_.find({h.group, h.seq});
        if (it != rounds_.end()) {
          n = it->second.nranks;
          for (int32_t r = 0; r < n; ++r)
            if (!it->second.pieces[r]) missing.push_back(r);
        }
        send(c, wire::encodeQueryReply(h.group, h.seq, n, missing));
        return true;
      }
      case wire::Type::Goodbye:
        c->goodbye = true;
        return true;
      default:
        refuse(c, "unexpected message type " + std::to_string(int(h.type)) + " from a rank");
        return false;
    }
  }

  /// Answers the rank's nonce with a fresh one and the root's proof over both.
  bool onAuthStart(const ConnPtr& c, const wire::AuthStart& m) {
    if (auth::randomBytes(c->rootNonce) != Status::Success) {
      refuse(c, "no random bytes for a challenge");
      return false;
    }
    c->rankNonce = m.nonce;
    c->stage = Stage::Challenged;
    send(c, wire::encodeChallenge(c->rootNonce,
                                  auth::rootProof(secret_, c->rankNonce, c->rootNonce)));
    return true;
  }

  bool onHello(const ConnPtr& c, const wire::Hello& m) {
    // The proof covers this connection's nonces, so a hello recorded on another connection fails
    // here; checked before anything the hello claims is looked at.
    if (!auth::sameProof(m.proof,
                         auth::rankProof(secret_, c->rankNonce, c->rootNonce, m.signedPart))) {
      refuse(c, "authentication failed: the hello's proof does not match (wrong secret, or a "
                "hello replayed from another connection)");
      return false;
    }
    if (nranks_ == 0) {
      nranks_ = m.nranks;
      slots_.assign(nranks_, 0);
    } else if (m.nranks != nranks_) {
      refuse(c, "rank " + std::to_string(m.rank) + " says nranks=" + std::to_string(m.nranks) +
                    " but the first rank said nranks=" + std::to_string(nranks_));
      return false;
    }
    if (slots_[m.rank] != 0) {
      refuse(c, "duplicate rank " + std::to_string(m.rank));
      return false;
    }
    c->helloTimer.cancel();
    c->stage = Stage::Joined;
    c->rank = m.rank;
    slots_[m.rank] = c->id;
    {
      std::lock_guard<std::mutex> lock(statsMu_);
      ++joined_;
      ++live_;
    }
    INFO(log::kBootstrap, "bootstrap root: rank %d of %d joined from %s", m.rank, nranks_,
         c->peer.c_str());
    wire::Gather g;
    g.rank = m.rank;
    g.nranks = nranks_;
    g.bytes = m.blob.size();
    g.data = m.blob;
    contribute(c, wire::kWorldGroup, 0, g, /*checkSizes=*/false);
    return true;
  }

  bool onGather(const ConnPtr& c, const wire::Header& h, const wire::Gather& g) {
    if (h.group == wire::kWorldGroup && (g.rank != c->rank || g.nranks != nranks_)) {
      refuse(c, "rank " + std::to_string(c->rank) + " sent a world round as rank " +
                    std::to_string(g.rank) + " of " + std::to_string(g.nranks));
      return false;
    }
    contribute(c, h.group, h.seq, g, true);
    return true;
  }

  void contribute(const ConnPtr& c, uint32_t group, uint32_t seq, const wire::Gather& g,
                  bool checkSizes) {
    auto [it, fresh] = rounds_.try_emplace({group, seq});
    Round& r = it->second;
    if (fresh) {
      r.nranks = g.nranks;
      r.op = g.op;
      r.root = g.root;
      r.bytes = g.bytes;
      r.firstRank = g.rank;
      r.pieces.resize(g.nranks);
      r.conns.assign(g.nranks, 0);
    }
    std::string err;
    if (g.nranks != r.nranks || g.op != r.op || (g.op == wire::Op::Broadcast && g.root != r.root)) {
      err = "rank " + std::to_string(g.rank) + " and rank " + std::to_string(r.firstRank) +
            " disagree on the collective (nranks/op/root) in round " + std::to_string(seq);
    } else if (checkSizes && g.bytes != r.bytes) {
      err = "size mismatch in round " + std::to_string(seq) + ": rank " + std::to_string(g.rank) +
            " gave " + std::to_string(g.bytes) + " bytes, rank " + std::to_string(r.firstRank) +
            " gave " + std::to_string(r.bytes);
    } else if (r.pieces[g.rank]) {
      err = "rank " + std::to_string(g.rank) + " contributed twice to round " + std::to_string(seq);
    } else if (r.bytes * static_cast<uint64_t>(r.nranks) > wire::kMaxMessageBytes) {
      err = "round " + std::to_string(seq) + " result exceeds the bootstrap message limit";
    }
    if (!err.empty() || !r.error.empty()) {
      if (r.error.empty()) {
        WARN("bootstrap root: %s", err.c_str());
        r.error = err;
        for (uint64_t id : r.conns) sendTo(id, wire::encodeError(group, seq, r.error));
      }
      send(c, wire::encodeError(group, seq, r.error));
      return;
    }
    r.pieces[g.rank] = Bytes(g.data.begin(), g.data.end());
    r.conns[g.rank] = c->id;
    if (++r.count < r.nranks) return;
    std::vector<Bytes> out;
    if (r.op == wire::Op::Broadcast) {
      out.push_back(std::move(*r.pieces[r.root]));
    } else {
      for (auto& p : r.pieces) out.push_back(std::move(*p));
    }
    auto frame = std::make_shared<Bytes>(wire::encodeResult(group, seq, out));
    for (uint64_t id : r.conns) sendTo(id, frame);
    rounds_.erase(it);
  }

  void rankLost(const ConnPtr& c, const std::string& why) {
    int rank = c->rank;
    closeConn(c);
    WARN("bootstrap root: %s", why.c_str());
    auto frame = std::make_shared<Bytes>(wire::encodePeerDown(rank, why));
    for (auto& [id, other] : conns_)
      if (other->rank >= 0) send(other, frame);
  }

  void refuse(const ConnPtr& c, const std::string& why) {
    std::string line = "refused connection from " + c->peer +
                       (c->rank >= 0 ? " (rank " + std::to_string(c->rank) + ")" : "") + ": " +
                       why;
    WARN("bootstrap root: %s", line.c_str());
    {
      std::lock_guard<std::mutex> lock(statsMu_);
      if (refusals_.size() < 1000) refusals_.push_back(line);
    }
    if (c->rank >= 0) {
      rankLost(c, "rank " + std::to_string(c->rank) + " was dropped: " + why);
    } else {
      tellAndClose(c, "refused by the bootstrap root: " + why);
    }
  }

  /// Before the handshake is done: tells the peer why (a real rank then fails at once with the
  /// reason instead of connecting again), then closes. Best effort and never blocks: one small
  /// frame fits a fresh connection's send buffer. What the peer already sent is discarded first,
  /// since closing with unread input resets the connection and can destroy the reason unread.
  void tellAndClose(const ConnPtr& c, const std::string& why) {
    if (c->closed) return;
    asio::error_code ignored;
    auto frame = wire::encodeError(wire::kWorldGroup, 0, why);
    c->sock.non_blocking(true, ignored);
    c->sock.send(asio::buffer(frame), 0, ignored);
    c->sock.shutdown(tcp::socket::shutdown_send, ignored);
    uint8_t scratch[4096];
    for (int i = 0; i < 64; ++i) {
      asio::error_code ec;
      if (c->sock.receive(asio::buffer(scratch), 0, ec) == 0 || ec) break;
    }
    closeConn(c);
  }

  void closeConn(const ConnPtr& c) {
    if (c->closed) return;
    c->closed = true;
    asio::error_code ignored;
    c->helloTimer.cancel();
    c->sock.shutdown(tcp::socket::shutdown_both, ignored);
    c->sock.close(ignored);
    conns_.erase(c->id);
    if (c->rank >= 0) {
      std::lock_guard<std::mutex> lock(statsMu_);
      --live_;
    }
    // Done once every rank that joined has gone: nothing left to serve.
    bool anyRank = false;
    for (auto& [id, other] : conns_) anyRank |= other->rank >= 0;
    if (joinedAny() && !anyRank) shutdown();
  }

  bool joinedAny() {
    std::lock_guard<std::mutex> lock(statsMu_);
    return joined_ > 0;
  }

  void shutdown() {
    asio::error_code ignored;
    listener_.close();
    auto conns = conns_;
    for (auto& [id, c] : conns) {
      c->closed = true;
      c->helloTimer.cancel();
      c->sock.close(ignored);
    }
    conns_.clear();
    rounds_.clear();
    io_.stop();
  }

  void sendTo(uint64_t id, std::shared_ptr<Bytes> frame) {
    auto it = conns_.find(id);
    if (it != conns_.end()) send(it->second, std::move(frame));
  }
  void sendTo(uint64_t id, Bytes frame) { sendTo(id, std::make_shared<Bytes>(std::move(frame))); }
  void send(const ConnPtr& c, Bytes frame) { send(c, std::make_shared<Bytes>(std::move(frame))); }
  void send(const ConnPtr& c, std::shared_ptr<Bytes> frame) {
    if (c->closed) return;
    c->outq.push_back(std::move(frame));
    if (c->outq.size() == 1) writeNext(c);
  }
  void writeNext(const ConnPtr& c) {
    asio::async_write(c->sock, asio::buffer(*c->outq.front()),
                      [this, c](const asio::error_code& ec, size_t) {
                        if (c->closed) return;
                        if (ec) return;  // the reader reports the broken connection
                        c->outq.pop_front();
                        if (!c->outq.empty()) writeNext(c);
                      });
  }

  const Secret secret_;
  const AllowList allow_;
  const int64_t helloTimeoutMs_;
  asio::io_context io_;
  Listener listener_;
  std::thread thread_;
  std::map<uint64_t, ConnPtr> conns_;
  std::map<std::pair<uint32_t, uint32_t>, Round> rounds_;
  std::vector<uint64_t> slots_;  // world rank -> connection id (0: not joined)
  int32_t nranks_ = 0;
  uint64_t nextConnId_ = 0;

  std::mutex statsMu_;
  bool running_ = false;
  int joined_ = 0;
  int live_ = 0;
  std::vector<std::string> refusals_;
};

struct Registry {
  std::mutex mu;
  pid_t owner = getpid();
  std::map<Secret, std::unique_ptr<RootServer>> roots;  // by secret
};

Registry& registry() {
  static Registry* r = new Registry;  // leaked: roots are stopped by an atexit handler instead
  return *r;
}

}  // namespace

void shutdownAllRoots() {
  Registry& reg = registry();
  std::map<Secret, std::unique_ptr<RootServer>> roots;
  {
    std::lock_guard<std::mutex> lock(reg.mu);
    // A forked child holds copies of the parent's roots but not their threads: leave them alone.
    if (reg.owner != getpid()) return;
    roots.swap(reg.roots);
  }
  for (auto& [secret, root] : roots) root->stopAndJoin();
}

Status createUniqueId(UniqueId* id) {
  if (id == nullptr) {
    WARN("bootstrap: createUniqueId: null id");
    return Status::InvalidArgument;
  }
  Endpoint want, got;
  NLCHECK(listenEndpointFromEnv(&want));
  AllowList allow;
  NLCHECK(allowListFromEnv(want, &allow));
  NLCHECK(auth::randomBytes(want.secret));
  int64_t helloMs = std::min<int64_t>(resolveTimeoutMs(0), 60000);
  std::unique_ptr<RootServer> root;
  try {
    root = std::make_unique<RootServer>(want.secret, std::move(allow), helloMs);
    NLCHECK(root->listen(want, &got));
    root->start();
  } catch (const std::exception& e) {
    WARN("bootstrap: cannot start the root server: %s", e.what());
    return Status::SystemError;
  }
  encodeUniqueId(got, id);

  Registry& reg = registry();
  std::vector<std::unique_ptr<RootServer>> done;
  {
    static std::once_flag atexitOnce;
    std::call_once(atexitOnce, [] { atexit(shutdownAllRoots); });
    std::lock_guard<std::mutex> lock(reg.mu);
    if (reg.owner != getpid()) {  // first root in a forked child: forget the parent's
      for (auto& [s, r] : reg.roots) (void)r.release();
      reg.roots.clear();
      reg.owner = getpid();
    }
    for (auto it = reg.roots.begin(); it != reg.roots.end();) {
      if (it->second->finished()) {
        done.push_back(std::move(it->second));
        it = reg.roots.erase(it);
      } else {
        ++it;
      }
    }
    reg.roots[got.secret] = std::move(root);
  }
  for (auto& r : done) r->join();  // reap roots whose thread has exited
  return Status::Success;
}

bool rootStats(const UniqueId& id, RootStats* out) {
  Endpoint ep;
  if (decodeUniqueId(id, &ep) != Status::Success) return false;
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mu);
  auto it = reg.roots.find(ep.secret);
  if (it == reg.roots.end() || reg.owner != getpid()) return false;
  *out = it->second->stats();
  return true;
}

}  // namespace nlccl::bootstrap
