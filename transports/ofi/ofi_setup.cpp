// OfiTransport construction and teardown: options from the environment, the provider choice,
// fabric / domain / address vector / completion queue / endpoint, the name exchange, peers set up
// on first use, and closing it all.
#include <poll.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "transports/ofi/ofi.hpp"
#include "transports/ofi/ofi_fabric.hpp"
#include "util/log.hpp"
#include "util/params.hpp"

namespace nlccl::transport {

using ofi::Fabric;

namespace {

constexpr uint64_t kBlobMagic = 0x31626f6c62696f6eull;
constexpr int kDefaultCredits = 16;
constexpr size_t kDefaultMrCache = 64;
constexpr size_t kMaxFragBytes = 8u << 20;      // one rendezvous fragment, at most
constexpr size_t kTcpFragBytes = 512u << 10;    // ... over tcp, unless NLCCL_OFI_MAX_MSG_BYTES
constexpr size_t kEagerBytes = 64u << 10;       // largest eager message (NLCCL_OFI_EAGER_BYTES)
constexpr size_t kTcpEagerBytes = 512u << 10;   // ... over tcp, in small jobs (kTcpEagerBudget)
constexpr size_t kTcpEagerBudget = 128u << 20;  // control buffers for every peer, over tcp
constexpr size_t kMaxBounceBytes = 256u << 10;  // one bounce chunk (reduce on arrival)
constexpr int kExtraCtrlBuffers = 4;            // two Credit messages, a Ping and a Pong
constexpr int kPollRanks = 16;                  // NLCCL_OFI_WAIT=auto polls up to this many ranks

/// What each rank publishes through the setup all-gather.
struct SetupBlob {
  uint64_t magic;
  int32_t rank;
  int32_t status;  // 0, or the Status with which this rank's setup failed
  uint32_t nameLen;
  uint32_t pad;
  char provider[48];
  uint8_t name[184];
};
static_assert(sizeof(SetupBlob) == 256);

/// A byte count of at least `min` (the default, with a warning, otherwise).
size_t bytesAtLeast(const Param<uint64_t>& p, const char* var, size_t min) {
  if (p.set && (!p.ok || p.value < min)) {
    WARN("ofi: ignoring %s (expected bytes >= %zu, e.g. 64K)", var, min);
    return p.def;
  }
  return static_cast<size_t>(p.value);
}

std::string describe(const OfiTransport::Options& o) {
  if (!o.provider.empty()) return "'" + o.provider + "' (NLCCL_OFI_PROVIDER)";
  if (!o.fiProvider.empty()) return "'" + o.fiProvider + "' (FI_PROVIDER)";
  return "efa or tcp;ofi_rxm (the default)";
}

fi_info* makeHints(const char* provName) {
  fi_info* hints = fi_allocinfo();
  if (!hints) return nullptr;
  hints->caps = FI_TAGGED | FI_MSG;
  hints->mode = FI_CONTEXT | FI_CONTEXT2;
  hints->ep_attr->type = FI_EP_RDM;
  // Every registration mode the transport can honour; the provider keeps the ones it needs.
  hints->domain_attr->mr_mode =
      FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
  hints->domain_attr->threading = FI_THREAD_DOMAIN;  // every call is made under the mutex
  hints->tx_attr->msg_order = FI_ORDER_NONE;        // the transport sequences its messages
  if (provName) hints->fabric_attr->prov_name = strdup(provName);
  return hints;
}

}  // namespace

// NLCCL_OFI_WAIT=auto: poll when the job is small (few connections for the provider to poll)
// and cannot oversubscribe this machine even if every rank ran here: ranks that share cores
// wait better blocked (4 ranks on 2 cores: 8-byte all-reduce ratio 1.12-1.18 blocked, 1.19-1.30
// polling).
bool OfiTransport::pollByDefault(int nranks) {
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  return nranks <= kPollRanks && cpus > 0 && nranks <= cpus;
}

// The tcp provider, alone or under rxm ("tcp", "tcp;ofi_rxm").
static bool isTcp(const std::string& provider) { return provider.rfind("tcp", 0) == 0; }

// Over tcp one fragment of a large message is one sendmsg into the kernel: each rank copies a
// whole fragment into socket buffers before it turns to what its peer sent, and 1-8 MiB of fresh
// socket-buffer pages per message cost the sender's copy more than the data (2-rank send/recv
// over loopback, 2 and 4 MiB: 1.26-1.34x Open MPI's time with 8 MiB fragments, 0.82-0.92 with
// 512 KiB; 128 KiB was no better than 512). efa and shm move large messages by RDMA or CMA
// themselves and keep the larger fragment (fewer completions). Setting NLCCL_OFI_MAX_MSG_BYTES
// (`explicitLimit`) lifts the tcp cap: the user's limit holds, up to kMaxFragBytes.
size_t OfiTransport::defaultFragBytes(const std::string& provider, bool explicitLimit) {
  return isTcp(provider) && !explicitLimit ? kTcpFragBytes : kMaxFragBytes;
}

// Over tcp a message up to one fragment goes eagerly: the receiver's copy out of its control
// buffer (about 25 us for 512 KiB) costs less than the rendezvous' grant, which a sender that
// is ahead of its peer waits for. All-reduce over loopback, 256 KiB-1 MiB (messages of 128-512
// KiB), nlccl / Open MPI time, 64 KiB against 512 KiB, alternating launches: 2 ranks (medians
// of 4) 0.76-1.37 against 0.59-0.87, 4 ranks (3 launches) 0.70-0.90 against 0.50-0.69
// (docs/ofi.md). 2 MiB eager was no better at 2 MiB. The price is memory: `credits` + 4 control
// buffers of this size per peer in use (10 MiB at 512 KiB), registered nowhere (tcp needs none),
// and touched as eager messages fill them. So the size shrinks in larger jobs (by powers of two,
// down to 64 KiB) until buffers for every other rank fit in kTcpEagerBudget (an all-to-all
// reaches every peer): at the default 16 credits 512 KiB up to 13 ranks, 256 KiB up to 26,
// 128 KiB up to 52, 64 KiB beyond. efa, which pins them, and shm keep 64 KiB.
size_t OfiTransport::defaultEagerBytes(const std::string& provider, int nranks, int credits) {
  if (!isTcp(provider)) return kEagerBytes;
  const size_t buffers = static_cast<size_t>(std::max(nranks - 1, 1)) *
                         static_cast<size_t>(std::max(credits, 0) + kExtraCtrlBuffers);
  size_t eager = kTcpEagerBytes;
  while (eager > kEagerBytes && eager * buffers > kTcpEagerBudget) eager /= 2;
  return eager;
}

// The one place that reads the transport's environment variables.
static OfiTransport::Options optionsFromEnv() {
  OfiTransport::Options o;
  o.provider = paramOfiProvider().value;
  if (const char* e = foreignEnv("FI_PROVIDER"); e && *e) o.fiProvider = e;
  o.eagerBytes = bytesAtLeast(paramOfiEagerBytes(), "NLCCL_OFI_EAGER_BYTES", 0);
  o.maxMsgBytes = bytesAtLeast(paramOfiMaxMsgBytes(), "NLCCL_OFI_MAX_MSG_BYTES", 4096);
  const Param<int64_t> cache = paramOfiMrCache();
  o.mrCacheEntries = cache.value >= 0 ? static_cast<size_t>(cache.value) : kDefaultMrCache;
  o.forceMrLocal = paramOfiForceMrLocal().value == 1;
  const std::string wait = paramOfiWait().value;
  if (wait == "fd") o.wait = OfiTransport::Options::Wait::Fd;
  else if (wait == "poll") o.wait = OfiTransport::Options::Wait::Poll;
  else if (wait != "auto") WARN("ofi: ignoring NLCCL_OFI_WAIT=%s (expected auto, fd or poll)", wait.c_str());
  const Param<int64_t> credits = paramOfiCredits();
  o.credits = kDefaultCredits;
  if (credits.set && (!credits.ok || credits.value < 2 || credits.value > 1024))
    WARN("ofi: ignoring NLCCL_OFI_CREDITS=%s (need 2..1024)", paramOfiCreditsText());
  else
    o.credits = static_cast<int>(credits.value);
  return o;
}

// rxm's passthru mode hands tagged messages straight to the tcp provider instead of running its
// own eager / segmentation / rendezvous protocols on top: nlccl never lets data arrive
// unexpected and sequences its own messages, so that layer only adds copies and round trips
// (32 KiB send/recv: 21 instead of 40-70 us here). Set before libfabric reads it; a value the
// user set wins. Other providers ignore it.
static void providerDefaults() { setenv("FI_OFI_RXM_ENABLE_PASSTHRU", "1", 0); }

// The provider: NLCCL_OFI_PROVIDER names it; else FI_PROVIDER (which libfabric applies itself)
// picks among what is there; else efa when present, else tcp over rxm.
static Status getInfo(const OfiTransport::Options& o, int rank, fi_info** out) {
  std::vector<const char*> tries;
  if (!o.provider.empty()) tries = {o.provider.c_str()};
  else if (!o.fiProvider.empty()) tries = {nullptr};
  else tries = {"efa", "tcp;ofi_rxm"};
  int rc = -FI_ENODATA;
  for (const char* name : tries) {
    fi_info* hints = makeHints(name);
    if (!hints) return Status::SystemError;
    rc = fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), nullptr, nullptr, 0, hints, out);
    fi_freeinfo(hints);
    if (rc == 0) return Status::Success;
    *out = nullptr;
  }
  WARN("ofi: rank %d: libfabric provider %s is not available or offers no FI_EP_RDM endpoint with "
       "FI_TAGGED (fi_getinfo: %s)",
       rank, describe(o).c_str(), fi_strerror(-rc));
  return Status::InvalidUsage;
}

bool ofi::TagLayout::init(int tagBits, int nranks) {
  rankBits = 1;
  while ((1 << rankBits) < nranks) ++rankBits;
  idBits = tagBits - 2 - rankBits;
  return idBits >= 24;
}

OfiTransport::OfiTransport(int rank, int nranks, std::chrono::milliseconds timeout,
                           std::function<Status()> health)
    : rank_(rank), nranks_(nranks), timeout_(timeout), health_(std::move(health)) {}

Status OfiTransport::create(int rank, int nranks, const AllGatherFn& allGather,
                            std::chrono::milliseconds timeout, std::function<Status()> health,
                            std::unique_ptr<OfiTransport>* out) {
  if (nranks < 1 || rank < 0 || rank >= nranks || !out || (nranks > 1 && !allGather)) {
    WARN("ofi: invalid arguments to OfiTransport::create (rank %d of %d)", rank, nranks);
    return Status::InvalidArgument;
  }
  std::unique_ptr<OfiTransport> t(new OfiTransport(rank, nranks, timeout, std::move(health)));
  NLCHECK(t->setup(allGather, optionsFromEnv()));
  *out = std::move(t);
  return Status::Success;
}

// Opens everything up to an enabled endpoint; failures name the provider. `waitFd`: the
// completion queue gets an FI_WAIT_FD wait object (when the provider has one).
static Status openEndpoint(Fabric& f, int rank, bool waitFd) {
  const char* prov = f.info->fabric_attr->prov_name;
  auto bad = [&](const char* what, int rc) {
    WARN("ofi: rank %d: provider '%s' refused %s: %s", rank, prov, what, fi_strerror(-rc));
    return Status::InvalidUsage;
  };
  int rc = fi_fabric(f.info->fabric_attr, &f.fabric, nullptr);
  if (rc) return bad("fi_fabric", rc);
  rc = fi_domain(f.fabric, f.info, &f.domain, nullptr);
  if (rc) return bad("fi_domain", rc);
  fi_av_attr av{};
  av.type = f.info->domain_attr->av_type == FI_AV_UNSPEC ? FI_AV_TABLE : f.info->domain_attr->av_type;
  rc = fi_av_open(f.domain, &av, &f.av, nullptr);
  if (rc) return bad("fi_av_open", rc);
  fi_cq_attr cq{};
  cq.format = FI_CQ_FORMAT_TAGGED;
  cq.size = f.info->tx_attr->size + f.info->rx_attr->size;
  cq.wait_obj = waitFd ? FI_WAIT_FD : FI_WAIT_NONE;  // providers without one (shm) are polled
  rc = fi_cq_open(f.domain, &cq, &f.cq, nullptr);
  if (rc && waitFd) {
    cq.wait_obj = FI_WAIT_NONE;
    rc = fi_cq_open(f.domain, &cq, &f.cq, nullptr);
  } else if (!waitFd || fi_control(&f.cq->fid, FI_GETWAIT, &f.waitFd) != 0) {
    f.waitFd = -1;
  }
  if (rc) return bad("fi_cq_open", rc);
  rc = fi_endpoint(f.domain, f.info, &f.ep, nullptr);
  if (rc) return bad("fi_endpoint", rc);
  rc = fi_ep_bind(f.ep, &f.av->fid, 0);
  if (rc) return bad("binding the address vector", rc);
  rc = fi_ep_bind(f.ep, &f.cq->fid, FI_TRANSMIT | FI_RECV);
  if (rc) return bad("binding the completion queue", rc);
  rc = fi_enable(f.ep);
  if (rc) return bad("fi_enable", rc);
  return Status::Success;
}

Status OfiTransport::setup(const AllGatherFn& allGather, const Options& opt) {
  fab_ = std::make_unique<Fabric>();
  eventFd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  nextCheck_ = std::chrono::steady_clock::now();
  peers_ = std::make_unique<Peer[]>(static_cast<size_t>(nranks_));
  SetupBlob mine{};
  mine.magic = kBlobMagic;
  mine.rank = rank_;
  providerDefaults();
  Status s = getInfo(opt, rank_, &fab_->info);
  const bool waitFd = opt.wait == Options::Wait::Fd ||
                      (opt.wait == Options::Wait::Auto && !pollByDefault(nranks_));
  if (s == Status::Success) s = openEndpoint(*fab_, rank_, waitFd);
  if (s == Status::Success) {
    const fi_info* info = fab_->info;
    providerName_ = info->fabric_attr->prov_name;
    snprintf(mine.provider, sizeof mine.provider, "%s", providerName_.c_str());
    size_t len = sizeof mine.name;
    int rc = fi_getname(&fab_->ep->fid, mine.name, &len);
    if (rc != 0 || len > sizeof mine.name) {
      WARN("ofi: rank %d: endpoint name of provider '%s' unavailable or longer than %zu bytes (%s)",
           rank_, providerName_.c_str(), sizeof mine.name, rc ? fi_strerror(-rc) : "too long");
      s = Status::InternalError;
    }
    mine.nameLen = static_cast<uint32_t>(len);
    uint64_t tagFormat = info->ep_attr->mem_tag_format;
    int tagBits = tagFormat ? 64 - __builtin_clzll(tagFormat) : 64;
    if (s == Status::Success && !tags_.init(tagBits, nranks_)) {
      WARN("ofi: rank %d: provider '%s' tags (%d bits) cannot address %d ranks", rank_,
           providerName_.c_str(), tagBits, nranks_);
      s = Status::InvalidUsage;
    }
    size_t maxMsg = info->ep_attr->max_msg_size;
    if (opt.maxMsgBytes) maxMsg = std::min(maxMsg, opt.maxMsgBytes);
    const size_t eager =
        opt.eagerBytes ? opt.eagerBytes : defaultEagerBytes(providerName_, nranks_, opt.credits);
    eagerBytes_ = std::min(eager, maxMsg - sizeof(ofi::CtrlHeader));
    ctrlBytes_ = sizeof(ofi::CtrlHeader) + eagerBytes_;
    fragBytes_ = std::min(maxMsg, defaultFragBytes(providerName_, opt.maxMsgBytes != 0));
    bounceBytes_ = std::min(fragBytes_, kMaxBounceBytes);
    grantWindow_ = std::max(2 * fragBytes_, size_t{8} << 20);
    credits_ = opt.credits;
    probePeers_ = providerName_ != "shm";  // see ofi.hpp: pings cannot help, and may block
    txCap_ = info->tx_attr->size;
    rxCap_ = info->rx_attr->size;
    // The test knob runs the registration path (efa's) over providers that need none.
    uint64_t mrMode = info->domain_attr->mr_mode | (opt.forceMrLocal ? FI_MR_LOCAL : 0);
    mr_ = std::make_unique<ofi::MrCache>(fab_->domain, fab_->ep, mrMode, opt.mrCacheEntries);
    // Below a few KiB the copy costs less than the provider's handling of a second part.
    if (!mr_->needed() && info->tx_attr->iov_limit >= 2) gatherFromBytes_ = ofi::kGatherFromBytes;
    INFO(log::kNet | log::kInit,
         "ofi: rank %d: provider %s (fabric %s, domain %s), mr_mode 0x%x, max_msg_size %zu, "
         "eager %zu bytes, %d credits, fragments %zu, bounce %zu, %s wait",
         rank_, providerName_.c_str(), info->fabric_attr->name, info->domain_attr->name,
         info->domain_attr->mr_mode, info->ep_attr->max_msg_size, eagerBytes_, credits_,
         fragBytes_, bounceBytes_, fab_->waitFd >= 0 ? "fd" : "polled");
  }
  mine.status = static_cast<int32_t>(s);
  if (nranks_ == 1) return s;

  // Everyone exchanges, failed or not, so that every rank learns at once that one could not
  // open the provider instead of waiting for it in a later exchange.
  std::vector<SetupBlob> all(static_cast<size_t>(nranks_));
  Status x = allGather(&mine, sizeof mine, all.data());
  if (x != Status::Success) {
    WARN("ofi: rank %d: setup exchange failed (%s)", rank_, statusName(x));
    return x;
  }
  if (s != Status::Success) return s;
  for (int p = 0; p < nranks_; ++p) {
    const SetupBlob& b = all[static_cast<size_t>(p)];
    if (b.magic != kBlobMagic || b.rank != p || b.nameLen > sizeof b.name ||
        !memchr(b.provider, 0, sizeof b.provider)) {
      WARN("ofi: rank %d: malformed setup record from rank %d", rank_, p);
      return Status::InternalError;
    }
    if (b.status != 0) {
      WARN("ofi: rank %d: rank %d could not open libfabric provider %s (%s)", rank_, p,
           describe(opt).c_str(), statusName(static_cast<Status>(b.status)));
      return Status::InvalidUsage;
    }
    if (providerName_ != b.provider) {
      WARN("ofi: rank %d uses provider '%s' but rank %d uses '%s'", rank_, providerName_.c_str(),
           p, b.provider);
      return Status::InvalidUsage;
    }
  }
  fab_->addrs.assign(static_cast<size_t>(nranks_), FI_ADDR_UNSPEC);
  for (int p = 0; p < nranks_; ++p) {
    if (p == rank_) continue;
    const SetupBlob& b = all[static_cast<size_t>(p)];
    uint8_t name[sizeof b.name + 1] = {};
    memcpy(name, b.name, b.nameLen);  // NUL-terminated for providers with string addresses
    fi_addr_t a = FI_ADDR_UNSPEC;
    int rc = fi_av_insert(fab_->av, name, 1, &a, 0, nullptr);
    if (rc != 1) {
      WARN("ofi: rank %d: cannot insert rank %d's address into the address vector (%s)", rank_,
           p, rc < 0 ? fi_strerror(-rc) : "not inserted");
      return Status::InternalError;
    }
    fab_->addrs[static_cast<size_t>(p)] = a;
    peers_[static_cast<size_t>(p)].addr = a;
  }
  if (providerName_ == "shm") NLCHECK(unlinkShmRegion(allGather, mine.name, mine.nameLen));
  return Status::Success;
}

// libfabric's shm provider keeps each endpoint's region in /dev/shm under its address
// ("fi_shm://<pid>:0:0" -> /dev/shm/<pid>:0:0) until fi_close, so a process killed before that
// leaves 16 MB behind. Every peer maps our region when it inserts our address, so once all have
// (one more exchange) the name can go, as the nlccl shm transport does with its own segments.
Status OfiTransport::unlinkShmRegion(const AllGatherFn& allGather, const uint8_t* name,
                                     size_t len) {
  int32_t done = 1;
  std::vector<int32_t> all(static_cast<size_t>(nranks_));
  NLCHECK(allGather(&done, sizeof done, all.data()));
  static constexpr char kPrefix[] = "fi_shm://";
  std::string addr(reinterpret_cast<const char*>(name), strnlen(reinterpret_cast<const char*>(name), len));
  if (addr.rfind(kPrefix, 0) != 0) return Status::Success;
  std::string path = "/" + addr.substr(sizeof kPrefix - 1);
  if (shm_unlink(path.c_str()) == 0)
    INFO(log::kNet, "ofi: rank %d: unlinked the shm provider's region %s", rank_, path.c_str());
  return Status::Success;
}

OfiTransport::Op* OfiTransport::newOp(OpKind kind, int peer) {
  static_assert(sizeof(fi_context2) <= sizeof(Op::fiContext));
  if (freeOps_.empty()) {
    constexpr size_t kBlock = 64;
    opBlocks_.push_back(std::make_unique<Op[]>(kBlock));
    for (size_t i = 0; i < kBlock; ++i) freeOps_.push_back(&opBlocks_.back()[i]);
  }
  Op* op = freeOps_.back();
  freeOps_.pop_back();
  *op = Op{};
  op->kind = kind;
  op->peer = peer;
  return op;
}

void OfiTransport::freeOp(Op* op) {
  if (op->kind == OpKind::CtrlSend) {
    freeCtrlSends_.push_back(op);  // keeps its buffer
    return;
  }
  freeOps_.push_back(op);
}

// Control send operations own a registered buffer of ctrlBytes_; made 16 at a time.
Status OfiTransport::newCtrlSendOp(int peer, Op** out) {
  if (freeCtrlSends_.empty()) {
    constexpr size_t kBatch = 16;
    slabs_.push_back(std::make_unique<char[]>(kBatch * ctrlBytes_));
    char* base = slabs_.back().get();
    void* desc = nullptr;
    NLCHECK(mr_->pin(base, kBatch * ctrlBytes_, &desc));
    for (size_t i = 0; i < kBatch; ++i) {
      Op* op = newOp(OpKind::CtrlSend, -1);
      op->buf = base + i * ctrlBytes_;
      op->desc = desc;
      freeCtrlSends_.push_back(op);
    }
  }
  Op* op = freeCtrlSends_.back();
  freeCtrlSends_.pop_back();
  op->peer = peer;
  op->critical = false;
  op->req = nullptr;
  *out = op;
  return Status::Success;
}

// First use of a peer: its control buffers are posted and its credits start full.
Status OfiTransport::activate(int peer) {
  Peer& p = peers_[static_cast<size_t>(peer)];
  if (p.active) return Status::Success;
  const size_t n = static_cast<size_t>(credits_ + kExtraCtrlBuffers);
  slabs_.push_back(std::make_unique<char[]>(n * ctrlBytes_));
  char* base = slabs_.back().get();
  void* desc = nullptr;
  NLCHECK(mr_->pin(base, n * ctrlBytes_, &desc));
  p.active = true;
  p.credits = credits_;
  p.lastHeard = std::chrono::steady_clock::now();
  active_.push_back(peer);
  for (size_t i = 0; i < n; ++i) {
    Op* op = newOp(OpKind::CtrlRecv, peer);
    op->buf = base + i * ctrlBytes_;
    op->bytes = ctrlBytes_;
    op->desc = desc;
    p.ctrlRecvs.push_back(op);
    NLCHECK(repostCtrl(op));
  }
  INFO(log::kNet, "ofi: rank %d: peer %d set up (%zu control buffers of %zu bytes)", rank_, peer,
       n, ctrlBytes_);
  return Status::Success;
}

Status OfiTransport::repostCtrl(Op* op) {
  Peer& p = peers_[static_cast<size_t>(op->peer)];
  int rc = fi_trecv(fab_->ep, op->buf, op->bytes, op->desc, FI_ADDR_UNSPEC,
                    tags_.make(ofi::TagKind::Ctrl, op->peer, 0), 0, op->fiContext);
  if (rc == -FI_EAGAIN) {
    pendingRx_.push_back(op);  // posted again from progress()
    return Status::Success;
  }
  if (rc != 0) {
    WARN("ofi: rank %d: posting a control receive for peer %d failed: %s", rank_, op->peer,
         fi_strerror(-rc));
    return Status::SystemError;
  }
  ++rxPosted_;
  (void)p;
  return Status::Success;
}

size_t OfiTransport::registrations() const {
  std::lock_guard<std::mutex> lock(mu_);
  return mr_ ? mr_->entries() : 0;
}

bool OfiTransport::blocksOnFd() const {
  std::lock_guard<std::mutex> lock(mu_);
  return fab_ && fab_->waitFd >= 0;
}

uint64_t OfiTransport::earlyGrants() const {
  std::lock_guard<std::mutex> lock(mu_);
  return grantsSent_;
}

uint64_t OfiTransport::gatheredSends() const {
  std::lock_guard<std::mutex> lock(mu_);
  return gatheredSends_;
}

int OfiTransport::activePeers() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(active_.size());
}

void OfiTransport::closeFabric() {
  if (!fab_) return;
  Fabric& f = *fab_;
  if (f.ep) fi_close(&f.ep->fid);  // first: drops every posted operation
  f.ep = nullptr;
  if (mr_) mr_->closeAll();
  if (f.av) fi_close(&f.av->fid);
  if (f.cq) fi_close(&f.cq->fid);
  if (f.domain) fi_close(&f.domain->fid);
  if (f.fabric) fi_close(&f.fabric->fid);
  if (f.info) fi_freeinfo(f.info);
  f = Fabric{};
  txPosted_ = rxPosted_ = criticalTx_ = preRx_ = preBounce_ = 0;
  pendingTx_.clear();
  pendingRx_.clear();
}

// Sends that carry data a peer needs have been handed to the provider, but closing the endpoint
// before the provider completes them could lose them: wait for that, as long as the peers live.
// The health callback is not called any more: what it reads may be gone already (a communicator
// destroys its bootstrap first); a dead peer still fails those sends.
void OfiTransport::linger() {
  lingering_ = true;
  auto deadline = std::chrono::steady_clock::now() + timeout_;
  int spins = 0;
  while (criticalTx_ > 0 && failed_ == Status::Success &&
         std::chrono::steady_clock::now() < deadline) {
    if (progressLocked() != Status::Success) break;
    if (criticalTx_ == 0) break;
    if (++spins < 64) sched_yield();
    else usleep(100);
  }
  if (criticalTx_ > 0)
    INFO(log::kNet, "ofi: rank %d: closing with %zu sends not completed", rank_, criticalTx_);
}

OfiTransport::~OfiTransport() {
  std::lock_guard<std::mutex> lock(mu_);
  if (rndvRecvs_)
    INFO(log::kNet, "ofi: rank %d: %llu of %llu rendezvous receives granted ahead of their Rts",
         rank_, static_cast<unsigned long long>(grantsSent_),
         static_cast<unsigned long long>(rndvRecvs_));
  if (failed_ == Status::Success && fab_ && fab_->ep) linger();
  closeFabric();
  if (eventFd_ >= 0) close(eventFd_);
}

}  // namespace nlccl::transport
