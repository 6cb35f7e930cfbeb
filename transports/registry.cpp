#include "transports/registry.hpp"

#include <algorithm>

#include "transports/loopback/loopback.hpp"
#include "transports/neuronlink/neuronlink.hpp"
#include "transports/router.hpp"
#include "transports/shm/shm.hpp"
#if NLCCL_HAVE_OFI
#include "transports/ofi/ofi.hpp"
#endif
#include "util/log.hpp"

namespace nlccl::transport {

namespace {

bool sameHost(const Context& c, int a, int b) { return c.hosts[a] == c.hosts[b]; }

// ---- loopback: ranks that are threads of this process ----
bool loopbackCanConnect(const Context& c, int, int) { return c.threads; }
Status loopbackCreate(const Context& c, std::unique_ptr<Transport>* out) {
  std::unique_ptr<LoopbackTransport> t;
  NLCHECK(LoopbackTransport::create(c.rank, c.nranks, c.allGather, &t));
  *out = std::move(t);
  return Status::Success;
}

// ---- shm: processes of one host ----
bool shmCanConnect(const Context& c, int a, int b) { return !c.threads && sameHost(c, a, b); }
Status shmCreate(const Context& c, std::unique_ptr<Transport>* out) {
  std::unique_ptr<ShmTransport> t;
  NLCHECK(ShmTransport::create(c.rank, c.nranks, c.peers, c.allGather, c.timeout, c.health, &t));
  *out = std::move(t);
  return Status::Success;
}

#if NLCCL_HAVE_OFI
// ---- ofi: processes on any host (libfabric: efa on AWS, tcp or shm elsewhere) ----
bool ofiCanConnect(const Context& c, int, int) { return !c.threads; }
Status ofiCreate(const Context& c, std::unique_ptr<Transport>* out) {
  std::unique_ptr<OfiTransport> t;
  NLCHECK(OfiTransport::create(c.rank, c.nranks, c.allGather, c.timeout, c.health, &t));
  *out = std::move(t);
  return Status::Success;
}
#endif

// ---- decorators ----
Status neuronlinkWrap(const Context& c, std::unique_ptr<Transport> inner,
                      std::unique_ptr<Transport>* out) {
  return NeuronLinkTransport::create(std::move(inner), c.topology, c.allGather, out);
}

const Decorator* findDecorator(const std::string& name) {
  for (const Decorator& d : decorators())
    if (name == d.name) return &d;
  return nullptr;
}
const Entry* findEntry(const std::string& name) {
  for (const Entry& e : entries())
    if (name == e.name) return &e;
  return nullptr;
}

std::string pairText(const Context& c, int a, int b) {
  return "ranks " + std::to_string(a) + " and " + std::to_string(b) +
         (c.threads ? " (threads of one process)"
                    : sameHost(c, a, b) ? " (processes on one host)"
                                        : " (host " + c.hosts[a] + " and host " + c.hosts[b] + ")");
}

}  // namespace

const std::vector<Entry>& entries() {
  static const std::vector<Entry> kEntries = {
      {"loopback", loopbackCanConnect, loopbackCreate},
      {"shm", shmCanConnect, shmCreate},
#if NLCCL_HAVE_OFI
      {"ofi", ofiCanConnect, ofiCreate},
#endif
  };
  return kEntries;
}

const std::vector<Decorator>& decorators() {
  static const std::vector<Decorator> kDecorators = {{"neuronlink", neuronlinkWrap}};
  return kDecorators;
}

std::string choices() {
  std::string s = "auto";
  for (const Entry& e : entries()) s += std::string(", ") + e.name;
  for (const Decorator& d : decorators()) s += std::string(", ") + d.name;
  return s;
}

Status connect(const Context& ctx, const std::string& choice, std::unique_ptr<Transport>* out) {
  const Entry* forced = choice == "auto" ? nullptr : findEntry(choice);
  const Decorator* deco = forced || choice == "auto" ? nullptr : findDecorator(choice);
  if (choice != "auto" && !forced && !deco) {
    WARN("transport '%s' is not one of %s", choice.c_str(), choices().c_str());
    return Status::InvalidArgument;
  }
  // The entry of every pair, the same on every rank (each computes the whole table).
  const auto& all = entries();
  const int n = ctx.nranks;
  auto pick = [&](int a, int b, int* idx) {
    for (size_t i = 0; i < all.size(); ++i)
      if ((!forced || &all[i] == forced) && all[i].canConnect(ctx, a, b)) {
        *idx = static_cast<int>(i);
        return true;
      }
    return false;
  };
  std::vector<char> used(all.size(), 0);
  std::vector<int> mine(static_cast<size_t>(n), -1);
  for (int a = 0; a < n; ++a)
    for (int b = a; b < n; ++b) {
      int idx = -1;
      if (!pick(a, b, &idx)) {
        if (forced) {
          WARN("rank %d: transport '%s' cannot connect %s", ctx.rank, choice.c_str(),
               pairText(ctx, a, b).c_str());
          return Status::InvalidArgument;
        }
        WARN("rank %d: no transport in this build can connect %s (built: %s)", ctx.rank,
             pairText(ctx, a, b).c_str(), choices().c_str());
        return Status::InvalidUsage;
      }
      used[static_cast<size_t>(idx)] = 1;
      if (a == ctx.rank) mine[static_cast<size_t>(b)] = idx;
      if (b == ctx.rank) mine[static_cast<size_t>(a)] = idx;
    }
  // Create every transport some pair uses, on every rank and in registry order (collective).
  std::vector<std::unique_ptr<Transport>> parts;
  std::vector<int> partOf(all.size(), -1);
  for (size_t i = 0; i < all.size(); ++i) {
    if (!used[i]) continue;
    Context c = ctx;
    c.peers.clear();
    for (int p = 0; p < n; ++p)
      if (p != ctx.rank && mine[static_cast<size_t>(p)] == static_cast<int>(i)) c.peers.push_back(p);
    std::unique_ptr<Transport> t;
    NLCHECK(all[i].create(c, &t));
    partOf[i] = static_cast<int>(parts.size());
    parts.push_back(std::move(t));
  }
  std::unique_ptr<Transport> path;
  if (parts.size() == 1) {
    path = std::move(parts.front());
  } else {
    std::vector<int> byPeer(static_cast<size_t>(n));
    for (int p = 0; p < n; ++p) byPeer[p] = partOf[static_cast<size_t>(mine[p])];
    path = std::make_unique<Router>(ctx.rank, n, std::move(parts), std::move(byPeer));
  }
  if (deco) NLCHECK(deco->wrap(ctx, std::move(path), &path));
  for (int p = 0; p < n; ++p)
    if (p != ctx.rank)
      INFO(log::kInit, "rank %d: peer %d over %s", ctx.rank, p, path->peerTransport(p));
  *out = std::move(path);
  return Status::Success;
}

}  // namespace nlccl::transport
