#include "bootstrap/bootstrap.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>
#include <mutex>
#include <map>
#include <thread>

#include "bootstrap/root.hpp"
#include "util/log.hpp"

namespace nlccl::bootstrap {

namespace {
/// Live bootstraps of this process per root (by the root's address in the id): only the last one
/// to go needs to wait for the others, which are all remote then.
std::mutex gKeepersMu;
std::map<std::string, int> gKeepers;
}  // namespace

struct Bootstrap::RootKeeper {
  UniqueId id;
  int64_t timeoutMs = 0;
  std::string key;
  explicit RootKeeper(const UniqueId& uid, int64_t ms)
      : id(uid), timeoutMs(ms), key(reinterpret_cast<const char*>(uid.bytes), sizeof(uid.bytes)) {
    std::lock_guard<std::mutex> lock(gKeepersMu);
    ++gKeepers[key];
  }
  ~RootKeeper() {
    {
      std::lock_guard<std::mutex> lock(gKeepersMu);
      auto it = gKeepers.find(key);
      const bool last = --it->second == 0;
      if (last) gKeepers.erase(it);
      if (!last) return;  // another bootstrap of this process still uses the root
    }
    RootStats st;
    const auto deadline = Link::Clock::now() + std::chrono::milliseconds(timeoutMs);
    while (rootStats(id, &st) && st.running && st.live > 0 && Link::Clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
};

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

Status Bootstrap::init(const UniqueId& id, int rank, int nranks, std::chrono::milliseconds timeout,
                       std::unique_ptr<Bootstrap>* out) {
  if (out == nullptr) {
    WARN("bootstrap: init: null output pointer");
    return Status::InvalidArgument;
  }
  if (nranks < 1 || nranks > wire::kMaxRanks) {
    WARN("bootstrap: init: nranks %d out of range [1, %d]", nranks, wire::kMaxRanks);
    return Status::InvalidArgument;
  }
  if (rank < 0 || rank >= nranks) {
    WARN("bootstrap: init: rank %d out of range [0, %d)", rank, nranks);
    return Status::InvalidArgument;
  }
  Endpoint ep;
  NLCHECK(decodeUniqueId(id, &ep));
  int64_t timeoutMs = resolveTimeoutMs(timeout.count());
  auto deadline = Link::Clock::now() + std::chrono::milliseconds(timeoutMs);

  std::unique_ptr<Bootstrap> b(new Bootstrap);
  b->rank_ = rank;
  b->nranks_ = nranks;
  b->timeoutMs_ = timeoutMs;
  b->keeper_ = std::make_shared<RootKeeper>(id, timeoutMs);
  std::string host = hostIdentity();
  NLCHECK(Link::connect(ep, rank, nranks,
                        {reinterpret_cast<const uint8_t*>(host.data()), host.size()}, deadline,
                        &b->link_));
  std::vector<Link::Bytes> pieces;
  NLCHECK(b->link_->awaitRound(wire::kWorldGroup, 0, nranks, deadline, timeoutMs, "join", &pieces));
  if (pieces.size() != static_cast<size_t>(nranks)) {
    WARN("bootstrap: join returned %zu ranks, expected %d", pieces.size(), nranks);
    return Status::InternalError;
  }
  for (auto& p : pieces) b->hosts_.emplace_back(p.begin(), p.end());
  b->worldRanks_.resize(nranks);
  std::iota(b->worldRanks_.begin(), b->worldRanks_.end(), 0);
  b->seq_ = 1;  // round 0 was the join
  INFO(log::kBootstrap, "bootstrap: rank %d of %d joined", rank, nranks);
  *out = std::move(b);
  return Status::Success;
}

// The last owner of link_ says goodbye and joins its thread; then the last owner of keeper_ waits
// for a root of this process to see every rank leave.
Bootstrap::~Bootstrap() = default;

Status Bootstrap::round(wire::Op op, int root, uint64_t bytes, const void* data, size_t dataBytes,
                        const std::string& what, std::vector<Link::Bytes>* pieces) {
  if (aborted_) {
    WARN("bootstrap: %s after abort()", what.c_str());
    return Status::InvalidUsage;
  }
  NLCHECK(health());
  uint32_t seq = seq_++;
  wire::Gather g;
  g.rank = rank_;
  g.nranks = nranks_;
  g.op = op;
  g.root = root;
  g.bytes = bytes;
  g.data = {static_cast<const uint8_t*>(data), dataBytes};
  NLCHECK(link_->send(wire::encodeGather(group_, seq, g)));
  auto deadline = Link::Clock::now() + std::chrono::milliseconds(timeoutMs_);
  return link_->awaitRound(group_, seq, nranks_, deadline, timeoutMs_,
                           what + " (round " + std::to_string(seq) + ")", pieces, &worldRanks_);
}

Status Bootstrap::allGather(const void* mine, size_t bytes, void* all) {
  if (bytes > 0 && (mine == nullptr || all == nullptr)) {
    WARN("bootstrap: allGather: null %s buffer", mine == nullptr ? "input" : "output");
    return Status::InvalidArgument;
  }
  if (bytes > wire::kMaxMessageBytes / static_cast<size_t>(nranks_)) {
    WARN("bootstrap: allGather: %zu bytes x %d ranks exceeds the %zu-byte bootstrap limit", bytes,
         nranks_, wire::kMaxMessageBytes);
    return Status::InvalidArgument;
  }
  std::vector<Link::Bytes> pieces;
  NLCHECK(round(wire::Op::AllGather, 0, bytes, mine, bytes, "enter all-gather", &pieces));
  if (pieces.size() != static_cast<size_t>(nranks_)) {
    WARN("bootstrap: allGather: got %zu pieces for %d ranks", pieces.size(), nranks_);
    return Status::InternalError;
  }
  for (int r = 0; r < nranks_; ++r) {
    if (pieces[r].size() != bytes) {
      WARN("bootstrap: allGather: rank %d sent %zu bytes, expected %zu", r, pieces[r].size(), bytes);
      return Status::InternalError;
    }
    if (bytes) memcpy(static_cast<uint8_t*>(all) + r * bytes, pieces[r].data(), bytes);
  }
  return Status::Success;
}

Status Bootstrap::barrier() {
  std::vector<Link::Bytes> pieces;
  return round(wire::Op::AllGather, 0, 0, nullptr, 0, "enter barrier", &pieces);
}

Status Bootstrap::broadcast(void* buf, size_t bytes, int root) {
  if (root < 0 || root >= nranks_) {
    WARN("bootstrap: broadcast: root %d out of range [0, %d)", root, nranks_);
    return Status::InvalidArgument;
  }
  if (bytes > 0 && buf == nullptr) {
    WARN("bootstrap: broadcast: null buffer");
    return Status::InvalidArgument;
  }
  if (bytes > wire::kMaxMessageBytes) {
    WARN("bootstrap: broadcast: %zu bytes exceeds the bootstrap limit", bytes);
    return Status::InvalidArgument;
  }
  bool isRoot = rank_ == root;
  std::vector<Link::Bytes> pieces;
  NLCHECK(round(wire::Op::Broadcast, root, bytes, isRoot ? buf : nullptr, isRoot ? bytes : 0,
                "enter broadcast", &pieces));
  if (pieces.size() != 1 || pieces[0].size() != bytes) {
    WARN("bootstrap: broadcast: malformed result from the root");
    return Status::InternalError;
  }
  if (!isRoot && bytes) memcpy(buf, pieces[0].data(), bytes);
  return Status::Success;
}

Status Bootstrap::split(int color, int key, std::unique_ptr<Bootstrap>* out) {
  if (out == nullptr) {
    WARN("bootstrap: split: null output pointer");
    return Status::InvalidArgument;
  }
  int32_t mine[2] = {color, key};
  std::vector<int32_t> all(2 * static_cast<size_t>(nranks_));
  NLCHECK(allGather(mine, sizeof(mine), all.data()));
  uint32_t splitIndex = splits_++;
  out->reset();
  if (color < 0) return Status::Success;
  std::vector<int> members;
  for (int r = 0; r < nranks_; ++r)
    if (all[2 * r] == color) members.push_back(r);
  std::stable_sort(members.begin(), members.end(),
                   [&](int a, int b) { return all[2 * a + 1] < all[2 * b + 1]; });
  // Distinct colors of one split have distinct lowest members, so XOR keeps their ids distinct.
  int leader = *std::min_element(members.begin(), members.end());
  uint32_t gid = static_cast<uint32_t>(splitmix64((uint64_t{group_} << 32) | splitIndex)) ^
                 static_cast<uint32_t>(leader);
  if (gid == wire::kWorldGroup) gid = 0x80000000u | static_cast<uint32_t>(leader);

  std::unique_ptr<Bootstrap> child(new Bootstrap);
  child->link_ = link_;
  child->keeper_ = keeper_;
  child->group_ = gid;
  child->timeoutMs_ = timeoutMs_;
  child->nranks_ = static_cast<int>(members.size());
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i] == rank_) child->rank_ = static_cast<int>(i);
    child->worldRanks_.push_back(worldRanks_[members[i]]);
    child->hosts_.push_back(hosts_[members[i]]);
  }
  *out = std::move(child);
  return Status::Success;
}

Status Bootstrap::shrink(const std::vector<int>& excluded, std::unique_ptr<Bootstrap>* out) {
  if (out == nullptr) {
    WARN("bootstrap: shrink: null output pointer");
    return Status::InvalidArgument;
  }
  if (aborted_) {
    WARN("bootstrap: shrink after abort()");
    return Status::InvalidUsage;
  }
  std::vector<bool> gone(static_cast<size_t>(nranks_), false);
  for (int r : excluded) gone[static_cast<size_t>(r)] = true;
  // Every survivor derives the same group id from the parent's and the excluded set, without an
  // exchange (the excluded ranks may be dead); the tag keeps shrinks' ids apart from splits'.
  uint64_t h = splitmix64((uint64_t{group_} << 32) | 0x5348524bu /* "SHRK" */);
  h = splitmix64(h ^ shrinks_++);
  std::unique_ptr<Bootstrap> child(new Bootstrap);
  child->link_ = link_;
  child->timeoutMs_ = timeoutMs_;
  for (int r = 0; r < nranks_; ++r) {
    if (gone[static_cast<size_t>(r)]) {
      h = splitmix64(h ^ static_cast<uint64_t>(r));
      continue;
    }
    if (r == rank_) child->rank_ = static_cast<int>(child->worldRanks_.size());
    child->worldRanks_.push_back(worldRanks_[r]);
    child->hosts_.push_back(hosts_[r]);
  }
  child->nranks_ = static_cast<int>(child->worldRanks_.size());
  uint32_t gid = static_cast<uint32_t>(h);
  if (gid == wire::kWorldGroup) gid ^= 0x40000000u;
  child->group_ = gid;
  *out = std::move(child);
  return Status::Success;
}

Status Bootstrap::health() const {
  if (aborted_) {
    log::setLastError("bootstrap: aborted");
    return Status::InvalidUsage;
  }
  return link_->health(&worldRanks_);
}

void Bootstrap::abort() {
  aborted_ = true;
  link_->abort();
}

}  // namespace nlccl::bootstrap
