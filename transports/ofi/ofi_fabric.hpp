// The libfabric objects of one OfiTransport and shared constants (internal to transports/ofi).
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#include <chrono>
#include <cstddef>
#include <vector>

namespace nlccl::transport::ofi {

/// How often progress() polls the health callback, and the longest single block of a wait.
constexpr auto kCheckInterval = std::chrono::milliseconds(50);
/// A peer something waits for that has been silent this long gets a Ping.
constexpr auto kProbeAfter = std::chrono::milliseconds(1000);
/// A Ping the provider refuses to post for this long (it cannot connect): the peer is gone.
constexpr auto kUnreachableAfter = std::chrono::milliseconds(2000);
/// Bounce chunks for reduce on arrival (each bounceBytes_), allocated on first need.
constexpr size_t kBounceChunks = 32;
/// Smallest eager payload sent from the sender's buffer rather than copied (OfiTransport's
/// gatherFromBytes_).
constexpr size_t kGatherFromBytes = 4096;
/// Eager messages a sender remembers per peer to tell a Grant for one of them (at least credits).
constexpr size_t kEagerLog = 1024;

struct Fabric {
  fi_info* info = nullptr;
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
  fid_av* av = nullptr;
  fid_cq* cq = nullptr;
  fid_ep* ep = nullptr;
  int waitFd = -1;  ///< the completion queue's FI_WAIT_FD descriptor, or -1 (polled)
  std::vector<fi_addr_t> addrs;
};

}  // namespace nlccl::transport::ofi
