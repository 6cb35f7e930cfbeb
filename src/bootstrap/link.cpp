#include "bootstrap/link.hpp"

#include <asio.hpp>
#include <algorithm>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "bootstrap/auth.hpp"
#include "bootstrap/wire.hpp"
#include "util/log.hpp"

namespace nlccl::bootstrap {

using asio::ip::tcp;
using Key = std::pair<uint32_t, uint32_t>;  // (group, seq)

struct Link::Impl {
  Impl() : sock(io), retry(io), guard(asio::make_work_guard(io)) {}

  asio::io_context io;
  tcp::socket sock;
  asio::steady_timer retry;
  asio::executor_work_guard<asio::io_context::executor_type> guard;
  // The io thread holds a reference to this Impl: a thread that shutdown() stops waiting for
  // (stuck in a handler: a failure callback that blocks, a library lock inherited across fork)
  // is detached and keeps what it runs on alive, instead of hanging the rank or running on
  // freed memory.
  std::thread thread;
  bool exited = false;  ///< the io thread has left io.run() (under mu)

  mutable std::mutex mu;
  std::condition_variable cv;
  // Filled by the reader thread, taken by waiters (all under mu).
  struct Outcome {
    bool error = false;
    std::string text;
    std::vector<Bytes> pieces;
  };
  std::map<Key, Outcome> done;
  std::map<Key, wire::QueryReply> queries;
  int connectState = 0;  // 0 pending, 1 connected, -1 failed
  Status connectStatus = Status::SystemError;
  std::string connectError;
  size_t queued = 0;     // frames not yet written
  bool closing = false;  // EOF is expected from now on

  std::atomic<uint32_t> failed{0};
  Status failStatus = Status::Success;
  std::string failText;
  // What failed: the link itself (root lost, malformed message), or only some ranks, whose
  // connections the root saw drop. Groups without those ranks (nlcclCommShrink's) go on.
  bool broken = false;
  std::set<int> down;                 ///< world ranks the root reported gone
  std::map<int, std::string> downWhy;
  std::vector<Notifier*> wakers;
  FailureCallback callback;

  // Reader/writer state: touched only on the io thread.
  uint8_t hdr[wire::kHeaderBytes];
  Bytes payload;
  std::deque<std::shared_ptr<Bytes>> outq;

  // Handshake state (io thread). The secret is wiped once the handshake is over.
  Endpoint root;
  Bytes helloSigned;  // rank, nranks, blob as the hello carries them
  wire::Nonce rankNonce{};
  int attempts = 0;
  int hangupDelayMs = 0;  // back-off between connections the root closed unanswered

  ~Impl() { auth::wipe(root.secret); }

  /// Records a peer the root reported gone, then fails as any failure does (first one only).
  void peerDown(int rank, const std::string& text) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (closing) return;
      down.insert(rank);
      downWhy.emplace(rank, text);
    }
    cv.notify_all();
    fail(Status::RemoteError, text, false);
  }

  /// The failure of a group of world ranks `members` (all ranks when null): the link's, or that
  /// of a member the root reported gone. Success otherwise. Under mu.
  bool groupFailed(const std::vector<int>* members, Status* s, std::string* text) const {
    if (failed.load() == 0) return false;
    if (broken || members == nullptr) {
      *s = failStatus;
      *text = failText;
      return true;
    }
    for (int m : *members)
      if (down.count(m)) {
        *s = Status::RemoteError;
        *text = downWhy.at(m);
        return true;
      }
    return false;
  }

  void fail(Status s, const std::string& text, bool linkBroken = true) {
    std::vector<Notifier*> ws;
    FailureCallback cb;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (linkBroken && !closing) broken = true;
      if (failed.load() != 0 || closing) return;
      failStatus = s;
      failText = text;
      failed.store(1, std::memory_order_release);
      ws = wakers;
      cb = callback;
    }
    cv.notify_all();
    futexWakeAll(&failed, false);
    for (Notifier* n : ws) n->notify();
    if (cb) cb(s, text);
  }

  void attemptConnect(tcp::endpoint target, Clock::time_point deadline) {
    ++attempts;
    sock.async_connect(target, [this, target, deadline](const asio::error_code& ec) {
      if (!ec) {
        asio::error_code ignored;
        sock.set_option(tcp::no_delay(true), ignored);
        startHandshake(target, deadline);
        return;
      }
      bool again = (ec == asio::error::connection_refused || ec == asio::error::try_again) &&
                   Clock::now() + std::chrono::milliseconds(50) < deadline;
      asio::error_code ignored;
      sock.close(ignored);
      if (again) {
        retry.expires_after(std::chrono::milliseconds(50));
        retry.async_wait([this, target, deadline](const asio::error_code& tec) {
          if (!tec) attemptConnect(target, deadline);
        });
        return;
      }
      // Refused until the deadline: the root's listening socket is gone, so its process is (it
      // opens the socket before the id exists). That is a dead peer, not a local failure.
      if (ec == asio::error::connection_refused)
        connectFailed(Status::RemoteError,
                      "the bootstrap root refused every connection until the timeout (its process "
                      "is gone?): " + ec.message());
      else if (ec == asio::error::connection_reset || ec == asio::error::connection_aborted ||
               ec == asio::error::timed_out || ec == asio::error::eof)
        connectFailed(Status::RemoteError, "the bootstrap root dropped the connection: " +
                                               ec.message());  // its process died mid-accept
      else
        connectFailed(Status::SystemError, ec.message());
    });
  }

  void connectFailed(Status s, const std::string& why) {
    asio::error_code ignored;
    sock.close(ignored);
    auth::wipe(root.secret);
    {
      std::lock_guard<std::mutex> lock(mu);
      if (connectState == 0) {
        connectState = -1;
        connectStatus = s;
        connectError = why;
      }
    }
    cv.notify_all();
  }

  /// Sends the rank's nonce; the root answers with a Challenge (or an Error saying why not).
  void startHandshake(tcp::endpoint target, Clock::time_point deadline) {
    if (auth::randomBytes(rankNonce) != Status::Success)
      return connectFailed(Status::SystemError, "no random bytes for the handshake");
    // Synchronous: a few dozen bytes always fit a fresh connection's send buffer.
    asio::error_code ec;
    asio::write(sock, asio::buffer(wire::encodeAuthStart(rankNonce)), ec);
    if (ec) return rootHungUp(target, deadline, ec.message());
    asio::async_read(sock, asio::buffer(hdr), [this, target, deadline](const asio::error_code& e,
                                                                       size_t) {
      if (e == asio::error::operation_aborted) return;
      if (e) return rootHungUp(target, deadline, e.message());
      wire::Header h;
      std::string why;
      // Until the root has proved itself, only a hello-sized frame is accepted from it.
      if (wire::parseHeader({hdr, sizeof(hdr)}, wire::kMaxHelloBytes, &h, &why) != wire::Parse::Ok)
        return connectFailed(Status::RemoteError, "malformed answer from the root: " + why);
      payload.resize(h.length);
      asio::async_read(sock, asio::buffer(payload),
                       [this, target, deadline, h](const asio::error_code& e2, size_t) {
                         if (e2 == asio::error::operation_aborted) return;
                         if (e2) return rootHungUp(target, deadline, e2.message());
                         wire::Body body;
                         std::string why2;
                         if (!wire::parseBody(h, payload, &body, &why2))
                           return connectFailed(Status::RemoteError,
                                                "malformed answer from the root: " + why2);
                         onHandshakeAnswer(h, body);
                       });
    });
  }

  void onHandshakeAnswer(const wire::Header& h, const wire::Body& body) {
    if (h.type == wire::Type::Error) {
      // Not authenticated yet: show the text, but only as printable characters.
      return connectFailed(Status::InvalidUsage,
                           printable(std::get<wire::ErrorMsg>(body).text));
    }
    if (h.type != wire::Type::Challenge)
      return connectFailed(Status::RemoteError, "message type " + std::to_string(int(h.type)) +
                                                    " from the root instead of a challenge");
    const auto& ch = std::get<wire::Challenge>(body);
    if (!auth::sameProof(ch.proof, auth::rootProof(root.secret, rankNonce, ch.nonce)))
      return connectFailed(Status::RemoteError,
                           "the root did not prove it holds this unique id's secret (a stale id, "
                           "or another program on that port)");
    wire::Proof proof = auth::rankProof(root.secret, rankNonce, ch.nonce, helloSigned);
    auth::wipe(root.secret);
    asio::error_code ec;
    asio::write(sock, asio::buffer(wire::encodeHello(proof, helloSigned)), ec);
    if (ec) return connectFailed(Status::RemoteError, "lost the root in the handshake: " + ec.message());
    {
      std::lock_guard<std::mutex> lock(mu);
      connectState = 1;
    }
    cv.notify_all();
    readHeader();
  }

  /// The root closed the connection before answering: it drops connections while it is out of
  /// descriptors. Nothing was committed yet, so connect again (10, 20 ... 200 ms apart).
  void rootHungUp(tcp::endpoint target, Clock::time_point deadline, const std::string& why) {
    asio::error_code ignored;
    sock.close(ignored);
    hangupDelayMs = std::clamp(hangupDelayMs * 2, 10, 200);
    if (Clock::now() + std::chrono::milliseconds(hangupDelayMs) >= deadline)
      return connectFailed(Status::RemoteError,
                           "the root closed the connection before answering (" + why + ", " +
                               std::to_string(attempts) + " attempts; out of descriptors?)");
    INFO(log::kBootstrap, "bootstrap: the root closed the connection before answering (%s); "
         "connecting again in %d ms", why.c_str(), hangupDelayMs);
    retry.expires_after(std::chrono::milliseconds(hangupDelayMs));
    retry.async_wait([this, target, deadline](const asio::error_code& tec) {
      if (!tec) attemptConnect(target, deadline);
    });
  }

  static std::string printable(std::string_view text) {
    std::string s;
    for (char ch : text.substr(0, 300)) s += (ch >= 0x20 && ch < 0x7f) ? ch : '?';
    return s;
  }

  void readHeader() {
    asio::async_read(sock, asio::buffer(hdr), [this](const asio::error_code& ec, size_t) {
      if (ec) return readFailed(ec);
      wire::Header h;
      std::string why;
      if (wire::parseHeader({hdr, sizeof(hdr)}, wire::kMaxMessageBytes, &h, &why) !=
          wire::Parse::Ok)
        return protocolError(why);
      payload.resize(h.length);
      asio::async_read(sock, asio::buffer(payload), [this, h](const asio::error_code& ec2, size_t) {
        if (ec2) return readFailed(ec2);
        wire::Body body;
        std::string why2;
        if (!wire::parseBody(h, payload, &body, &why2)) return protocolError(why2);
        if (handle(h, body)) readHeader();
      });
    });
  }

  bool handle(const wire::Header& h, const wire::Body& body) {
    Key key{h.group, h.seq};
    switch (h.type) {
      case wire::Type::Result: {
        Outcome o;
        for (auto piece : std::get<wire::Result>(body).pieces) o.pieces.emplace_back(piece.begin(), piece.end());
        std::lock_guard<std::mutex> lock(mu);
        done[key] = std::move(o);
        break;
      }
      case wire::Type::Error: {
        Outcome o;
        o.error = true;
        o.text = std::string(std::get<wire::ErrorMsg>(body).text);
        std::lock_guard<std::mutex> lock(mu);
        done[key] = std::move(o);
        break;
      }
      case wire::Type::QueryReply: {
        std::lock_guard<std::mutex> lock(mu);
        queries[key] = std::get<wire::QueryReply>(body);
        break;
      }
      case wire::Type::PeerDown: {
        const auto& pd = std::get<wire::PeerDown>(body);
        peerDown(pd.rank, std::string(pd.reason));
        return true;  // keep reading: the root still serves groups without that rank
      }
      default:
        protocolError("unexpected message type " + std::to_string(int(h.type)) + " from the root");
        return false;
    }
    cv.notify_all();
    return true;
  }

  void protocolError(const std::string& why) {
    fail(Status::InternalError, "bootstrap: malformed message from the root: " + why);
    asio::error_code ignored;
    sock.close(ignored);
  }

  void readFailed(const asio::error_code& ec) {
    if (ec == asio::error::operation_aborted) return;
    fail(Status::RemoteError, "bootstrap: lost the connection to the root (" + ec.message() + ")");
  }

  void write(std::shared_ptr<Bytes> frame) {
    outq.push_back(std::move(frame));
    if (outq.size() == 1) writeNext();
  }
  void writeNext() {
    asio::async_write(sock, asio::buffer(*outq.front()), [this](const asio::error_code& ec, size_t) {
      outq.pop_front();
      {
        std::lock_guard<std::mutex> lock(mu);
        --queued;
      }
      cv.notify_all();
      if (ec) {
        if (ec != asio::error::operation_aborted)
          fail(Status::RemoteError, "bootstrap: cannot write to the root (" + ec.message() + ")");
        while (!outq.empty()) {  // drop the rest: the connection is gone
          outq.pop_front();
          std::lock_guard<std::mutex> lock(mu);
          --queued;
        }
        return;
      }
      if (!outq.empty()) writeNext();
    });
  }

  /// Stops the io thread; `graceful` first waits (bounded) for queued writes to go out.
  void shutdown(bool graceful) {
    if (graceful) {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait_for(lock, std::chrono::seconds(1), [this] { return queued == 0; });
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      closing = true;
    }
    asio::post(io, [this] {
      asio::error_code ignored;
      sock.shutdown(tcp::socket::shutdown_both, ignored);
      sock.close(ignored);
      retry.cancel();
    });
    guard.reset();
    if (!thread.joinable()) return;
    if (thread.get_id() == std::this_thread::get_id()) {
      thread.detach();  // destroyed from a failure callback: cannot join ourselves
      return;
    }
    bool out;
    {
      std::unique_lock<std::mutex> lock(mu);
      out = cv.wait_for(lock, kJoinBound, [this] { return exited; });
    }
    if (out) {
      thread.join();
      return;
    }
    WARN("bootstrap: the connection's io thread did not stop within %lld ms (stuck in a "
         "handler); leaving it behind",
         static_cast<long long>(kJoinBound.count()));
    thread.detach();
  }

  /// How long shutdown() waits for the io thread: its handlers are short, and its closing ones
  /// run at once.
  static constexpr std::chrono::milliseconds kJoinBound{2000};

  /// Runs on the io thread: the io loop until shutdown, then says so.
  static void run(const std::shared_ptr<Impl>& self) {
    try {
      self->io.run();
    } catch (const std::exception& e) {
      self->fail(Status::InternalError,
                 std::string("bootstrap: reader thread failed: ") + e.what());
    }
    {
      std::lock_guard<std::mutex> lock(self->mu);
      self->exited = true;
    }
    self->cv.notify_all();
  }
};

Link::Link(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

Link::~Link() { close(); }

Status Link::connect(const Endpoint& ep, int32_t rank, int32_t nranks,
                     std::span<const uint8_t> blob, Clock::time_point deadline,
                     std::shared_ptr<Link>* out) {
  std::shared_ptr<Link> link;
  try {
    link.reset(new Link(std::make_shared<Impl>()));
  } catch (const std::exception& e) {
    WARN("bootstrap: cannot create the connection: %s", e.what());
    return Status::SystemError;
  }
  Impl* im = link->impl_.get();
  im->root = ep;
  im->helloSigned = wire::helloSignedPart(rank, nranks, blob);
  asio::ip::address addr;
  if (ep.ipv6) {
    asio::ip::address_v6::bytes_type b;
    std::copy(ep.addr.begin(), ep.addr.end(), b.begin());
    addr = asio::ip::address_v6(b);
  } else {
    addr = asio::ip::address_v4({ep.addr[0], ep.addr[1], ep.addr[2], ep.addr[3]});
  }
  tcp::endpoint target(addr, ep.port);
  asio::post(im->io, [im, target, deadline] { im->attemptConnect(target, deadline); });
  im->thread = std::thread([self = link->impl_] { Impl::run(self); });
  std::unique_lock<std::mutex> lock(im->mu);
  im->cv.wait_until(lock, deadline, [im] { return im->connectState != 0; });
  int state = im->connectState;
  Status status = im->connectStatus;
  std::string err = im->connectError;
  lock.unlock();
  if (state == 1) {
    *out = std::move(link);
    return Status::Success;
  }
  link->abort();
  if (state == 0) {
    WARN("bootstrap: timed out connecting to the root at %s", ep.toString().c_str());
    return Status::Timeout;
  }
  WARN("bootstrap: cannot join the root at %s: %s", ep.toString().c_str(), err.c_str());
  return status;
}

Status Link::send(Bytes frame) {
  Impl* im = impl_.get();
  {
    std::lock_guard<std::mutex> lock(im->mu);
    if (im->failed.load() != 0 && im->broken) {
      log::setLastError(im->failText);
      return im->failStatus;
    }
    if (im->closing) return Status::InvalidUsage;
    ++im->queued;
  }
  auto p = std::make_shared<Bytes>(std::move(frame));
  asio::post(im->io, [im, p] { im->write(p); });
  return Status::Success;
}

Status Link::awaitRound(uint32_t group, uint32_t seq, int nranks, Clock::time_point deadline,
                        int64_t timeoutMs, const std::string& what, std::vector<Bytes>* pieces,
                        const std::vector<int>* members) {
  Impl* im = impl_.get();
  Key key{group, seq};
  // Ask the root who is missing a little before the deadline so the Timeout can name them.
  auto margin = std::min<Clock::duration>(std::chrono::milliseconds(100),
                                          std::chrono::milliseconds(timeoutMs / 10));
  auto queryAt = deadline - margin;
  bool queried = false;
  std::unique_lock<std::mutex> lock(im->mu);
  for (;;) {
    auto it = im->done.find(key);
    if (it != im->done.end()) {
      Impl::Outcome o = std::move(it->second);
      im->done.erase(it);
      im->queries.erase(key);
      lock.unlock();
      if (o.error) {
        WARN("bootstrap: %s failed: %s", what.c_str(), o.text.c_str());
        return Status::InvalidUsage;
      }
      *pieces = std::move(o.pieces);
      return Status::Success;
    }
    Status s;
    std::string text;
    if (im->groupFailed(members, &s, &text)) {
      lock.unlock();
      WARN("bootstrap: %s: %s", what.c_str(), text.c_str());
      return s;
    }
    auto now = Clock::now();
    if (now >= deadline) break;
    if (!queried && now >= queryAt) {
      queried = true;
      lock.unlock();
      if (send(wire::encodeQuery(group, seq, 0)) != Status::Success) {
        lock.lock();
        continue;  // the failure is reported above
      }
      lock.lock();
      continue;
    }
    im->cv.wait_until(lock, queried ? deadline : queryAt);
  }
  std::string who = "ranks (unknown: the root did not answer)";
  auto q = im->queries.find(key);
  if (q != im->queries.end()) {
    who = (q->second.missing.size() == 1 ? "rank " : "ranks ") +
          wire::formatRankList(q->second.missing) + " of " + std::to_string(q->second.nranks);
    im->queries.erase(q);
  } else {
    who += " of " + std::to_string(nranks);
  }
  lock.unlock();
  WARN("bootstrap: timed out after %lld ms waiting for %s to %s", static_cast<long long>(timeoutMs),
       who.c_str(), what.c_str());
  return Status::Timeout;
}

Status Link::health(const std::vector<int>* members) const {
  Impl* im = impl_.get();
  if (im->failed.load(std::memory_order_acquire) == 0) return Status::Success;
  std::lock_guard<std::mutex> lock(im->mu);
  Status s;
  std::string text;
  if (!im->groupFailed(members, &s, &text)) return Status::Success;
  log::setLastError(text);
  return s;
}

const std::atomic<uint32_t>* Link::failureWord() const { return &impl_->failed; }

void Link::addWaker(Notifier* n) {
  bool failedNow;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->wakers.push_back(n);
    failedNow = impl_->failed.load() != 0;
  }
  if (failedNow) n->notify();
}

void Link::removeWaker(Notifier* n) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  std::erase(impl_->wakers, n);
}

void Link::setFailureCallback(FailureCallback cb) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->callback = std::move(cb);
}

void Link::close() {
  if (!impl_ || !impl_->thread.joinable()) return;
  bool sendBye;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    // A failed peer does not make our own exit disorderly: say goodbye while the root is there.
    sendBye = impl_->connectState == 1 && !impl_->closing;
  }
  if (sendBye) {
    Impl* im = impl_.get();
    {
      std::lock_guard<std::mutex> lock(im->mu);
      ++im->queued;
    }
    auto p = std::make_shared<Bytes>(wire::encodeGoodbye());
    asio::post(im->io, [im, p] { im->write(p); });
  }
  impl_->shutdown(sendBye);
}

void Link::abort() {
  if (!impl_ || !impl_->thread.joinable()) return;
  impl_->shutdown(false);
}

}  // namespace nlccl::bootstrap
