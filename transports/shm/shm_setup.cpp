// ShmTransport construction: segment geometry from the environment, the name exchange, mapping
// the peers' segments and the unlink handshake.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

#include "transports/shm/shm.hpp"
#include "util/futex.hpp"
#include "util/log.hpp"
#include "util/params.hpp"
#include "util/process.hpp"

namespace nlccl::transport {

namespace {

constexpr uint64_t kBlobMagic = 0x626f6c626d687331ull;
/// Initial room in each peer's queues of sends, posted receives and single-copy sends.
constexpr size_t kQueueDepth = 16;

/// What each rank publishes through the setup all-gather.
struct SetupBlob {
  uint64_t magic;
  int32_t rank;
  int32_t pid;
  uint64_t startTime;
  int32_t fd;  ///< the owner's descriptor of its segment (/proc/<pid>/fd/<fd>)
  int32_t pad;
  uint64_t id;    ///< the segment's allocation id (checked when mapping)
  uint64_t size;  ///< bytes of the segment's allocation
  CpuMask cpus;   ///< where the rank may run (affinityMask)
};

void geometryFromEnv(uint32_t* slots, uint64_t* slotBytes) {
  const Param<uint64_t> bytes = paramShmSlotBytes();
  *slotBytes = bytes.def;
  if (bytes.set && bytes.ok && bytes.value > 0)
    *slotBytes = std::clamp<uint64_t>((bytes.value + 4095) / 4096 * 4096, 4096, uint64_t{1} << 30);
  else if (bytes.set)
    WARN("shm: ignoring NLCCL_SHM_SLOT_BYTES=%s (expected bytes, e.g. 512K)", paramShmSlotBytesText());
  const Param<int64_t> n = paramShmSlots();
  *slots = static_cast<uint32_t>(n.def);
  if (n.set && n.ok && n.value >= 2)
    *slots = static_cast<uint32_t>(std::min<int64_t>(n.value, 4096));
  else if (n.set)
    WARN("shm: ignoring NLCCL_SHM_SLOTS=%s (need >= 2)", paramShmSlotsText());
}

uint64_t singleCopyFromEnv() {
  const Param<uint64_t> v = paramShmSingleCopyBytes();  // 0 disables
  return v.value;  // the default when malformed (logged)
}

// The LL threshold and the lines per LL FIFO: room for at least eight of the largest records.
void llFromEnv(uint64_t* llBytes, uint32_t* llLines) {
  const Param<uint64_t> v = paramShmLLBytes();  // 0 disables
  *llBytes = std::min<uint64_t>(v.value, shm::kLLMaxBytes);
  uint32_t lines = 1024;
  while (lines < 8 * shm::llLinesFor(*llBytes)) lines *= 2;
  *llLines = lines;
}

}  // namespace


ShmTransport::ShmTransport(int rank, int nranks, std::chrono::milliseconds timeout,
                           std::function<Status()> health)
    : rank_(rank), nranks_(nranks), timeout_(timeout), health_(std::move(health)) {}

Status ShmTransport::create(int rank, int nranks, const AllGatherFn& allGather,
                            std::chrono::milliseconds timeout, std::function<Status()> health,
                            std::unique_ptr<ShmTransport>* out) {
  std::vector<int> all;
  for (int p = 0; p < nranks; ++p)
    if (p != rank) all.push_back(p);
  return create(rank, nranks, std::move(all), allGather, timeout, std::move(health), out);
}

Status ShmTransport::create(int rank, int nranks, std::vector<int> peers,
                            const AllGatherFn& allGather, std::chrono::milliseconds timeout,
                            std::function<Status()> health, std::unique_ptr<ShmTransport>* out) {
  if (nranks < 1 || rank < 0 || rank >= nranks || !out || (nranks > 1 && !allGather)) {
    WARN("shm: invalid arguments to ShmTransport::create (rank %d of %d)", rank, nranks);
    return Status::InvalidArgument;
  }
  for (int p : peers)
    if (p < 0 || p >= nranks || p == rank) {
      WARN("shm: rank %d: peer %d is not another rank of the %d", rank, p, nranks);
      return Status::InvalidArgument;
    }
  std::unique_ptr<ShmTransport> t(new ShmTransport(rank, nranks, timeout, std::move(health)));
  std::sort(peers.begin(), peers.end());
  peers.erase(std::unique(peers.begin(), peers.end()), peers.end());
  t->served_ = std::move(peers);
  NLCHECK(t->setup(allGather));
  *out = std::move(t);
  return Status::Success;
}

Status ShmTransport::setup(const AllGatherFn& allGather) {
  uint32_t slots;
  uint64_t slotBytes;
  geometryFromEnv(&slots, &slotBytes);
  singleCopyBytes_ = singleCopyFromEnv();
  singleCopyInputBytes_ =
      singleCopyBytes_ == 0 ? 0 : std::min(singleCopyBytes_, paramShmSingleCopyInputBytes().value);
  splitBytes_ = singleCopyBytes_ == 0 ? 0 : paramShmSplitBytes().value;
  uint32_t llLines;
  llFromEnv(&llBytes_, &llLines);
  llStage_.reset(new char[shm::kLLMaxBytes]);
  llLook_.reset(new std::atomic<uint64_t>[static_cast<size_t>(nranks_)]);
  for (int r = 0; r < nranks_; ++r) llLook_[static_cast<size_t>(r)].store(0);
  NLCHECK(shm::Segment::create(nranks_, rank_, slots, slotBytes, llLines, &own_));
  nextCheck_ = std::chrono::steady_clock::now();
  peers_.resize(static_cast<size_t>(nranks_));
  heldWakes_.reserve(static_cast<size_t>(nranks_));
  selfSends_.reserve(kQueueDepth);
  selfRecvs_.reserve(kQueueDepth);
  INFO(log::kShm,
       "shm: rank %d: segment of %" PRIu64 " bytes, %u slots x %" PRIu64
       " bytes per peer, LL up to %" PRIu64 " bytes (%u lines), single copy from %" PRIu64
       " bytes",
       rank_, own_.where().size, slots, slotBytes, llBytes_, llLines, singleCopyBytes_);
  if (nranks_ == 1) return Status::Success;

  // The exchange is collective over the whole group, even for a rank that serves no peer.
  SetupBlob mine{};
  mine.magic = kBlobMagic;
  mine.rank = rank_;
  mine.pid = static_cast<int32_t>(getpid());
  char st;
  readProcStat(getpid(), &st, &mine.startTime);
  mine.fd = own_.where().fd;
  mine.id = own_.where().id;
  mine.size = own_.where().size;
  mine.cpus = affinityMask();
  std::vector<SetupBlob> all(static_cast<size_t>(nranks_));
  Status s = allGather(&mine, sizeof mine, all.data());
  if (s != Status::Success) {
    WARN("shm: rank %d: setup exchange failed (%s)", rank_, statusName(s));
    return s;
  }
  // Waits yield at once when the ranks this transport serves (and this one) outnumber the CPUs
  // they may run on together, whatever each one's own affinity (mpirun binds each to one core).
  std::vector<CpuMask> masks{mine.cpus};
  for (int p : served_) masks.push_back(all[static_cast<size_t>(p)].cpus);
  const int cpus = cpusInUnion(masks.data(), static_cast<int>(masks.size()));
  if (static_cast<int>(masks.size()) > cpus) yieldEvery_ = 1;
  INFO(log::kShm, "shm: rank %d: %zu ranks on %d CPUs: waits %s", rank_, masks.size(), cpus,
       yieldEvery_ == 1 ? "yield at once" : "poll first");
  // Segments have no names: whatever happens from here, nothing is left in /dev/shm.
  const uint32_t sharers = static_cast<uint32_t>(served_.size());  // peers mapping each segment
  for (int p : served_) {
    const SetupBlob& b = all[static_cast<size_t>(p)];
    if (b.magic != kBlobMagic || b.rank != p || b.pid <= 0 || b.fd < 0) {
      WARN("shm: rank %d: malformed setup record from rank %d", rank_, p);
      return Status::InternalError;
    }
    Peer& peer = peers_[static_cast<size_t>(p)];
    // Queues sized now, so that the first receive posted ahead of its message (the LL path
    // takes most small ones directly) does not allocate on a warmed-up hot path.
    peer.sends.reserve(kQueueDepth);
    peer.posted.reserve(kQueueDepth);
    peer.inflight.reserve(kQueueDepth);
    peer.pid = b.pid;
    peer.startTime = b.startTime;
    shmem::AllocationRef where;
    where.fd = b.fd;
    where.id = b.id;
    where.size = b.size;
    if (Status os = shm::Segment::open(b.pid, where, nranks_, p, &peer.seg); os != Status::Success) {
      // A peer that died since the exchange took its segment with it, and one whose own set-up
      // failed (another peer died, say) freed it, maybe living on a while (rank 0 waits for
      // the others to leave its bootstrap root): either is the peer's failure (RemoteError),
      // not ours. The mapping tells (it found the descriptor gone).
      if (os == Status::RemoteError) {
        WARN("shm: rank %d: peer rank %d (pid %d) died or gave up during setup", rank_, p, b.pid);
        return Status::RemoteError;
      }
      // Any other failure is ours, unless the peer turns out to be dying (its /proc entries may
      // refuse access meanwhile): give it a moment to show as dead (up to 2 s: on a loaded host
      // the exit of a killed process can take longer than 200 ms, and this is the error path).
      bool dead = false;
      for (int i = 0; i < 400 && !(dead = processDead(peer.pid, peer.startTime)); ++i)
        usleep(5000);
      if (dead) {
        WARN("shm: rank %d: peer rank %d (pid %d) died during setup", rank_, p, b.pid);
        return Status::RemoteError;
      }
      return os;
    }
    peer.seg.header()->mapped.fetch_add(1);
    peer.seg.ringDoorbell();
  }

  // Wait until every peer has mapped our segment: a peer that dies during set-up is an error
  // here, not a hang later.
  auto* h = own_.header();
  auto deadline = std::chrono::steady_clock::now() + timeout_;
  while (true) {
    uint32_t epoch = h->epoch.load();
    uint32_t mapped = h->mapped.load();
    if (mapped >= sharers) break;
    auto now = std::chrono::steady_clock::now();
    Status bad = Status::Success;
    if (now >= deadline) {
      WARN("shm: rank %d: only %u of %u peers mapped its segment within %lld ms", rank_, mapped,
           sharers, static_cast<long long>(timeout_.count()));
      bad = Status::Timeout;
    }
    if (bad == Status::Success) bad = checkPeers();
    for (int p : served_)
      if (bad == Status::Success && peers_[static_cast<size_t>(p)].gone != Gone::No) {
        WARN("shm: rank %d: peer rank %d died during setup", rank_, p);
        bad = Status::RemoteError;
      }
    if (bad != Status::Success) return bad;
    h->sleepers.fetch_add(1);
    futexWait(&h->epoch, epoch, std::chrono::milliseconds(10), true);
    h->sleepers.fetch_sub(1);
  }
  return Status::Success;
}

}  // namespace nlccl::transport
