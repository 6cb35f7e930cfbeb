// The 128-byte unique id that names a bootstrap root (address + port + random secret), how the
// root's listen address is chosen from the environment, and the host identity used for "same host".
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "util/status.hpp"

namespace nlccl::bootstrap {

/// Opaque to users; the same size as nlcclUniqueId so the C API can copy it byte for byte.
struct UniqueId {
  uint8_t bytes[128] = {};
};
static_assert(sizeof(UniqueId) == 128);

/// Decoded form of a UniqueId.
struct Endpoint {
  bool ipv6 = false;
  std::array<uint8_t, 16> addr{};  ///< IPv4 uses the first 4 bytes (network order)
  uint16_t port = 0;
  uint64_t secret = 0;

  /// "127.0.0.1:41234" or "[::1]:41234".
  std::string toString() const;
};

constexpr uint32_t kIdMagic = 0x4449434eu;  // "NCID"
constexpr uint16_t kIdVersion = 1;

/// Writes magic, version, address, port and secret; the rest of the id is zero.
void encodeUniqueId(const Endpoint& ep, UniqueId* id);
/// Checks magic, version, family and the zero tail; InvalidArgument with a message otherwise.
Status decodeUniqueId(const UniqueId& id, Endpoint* ep);

/// The address createUniqueId listens on: NLCCL_BOOTSTRAP_ADDR ("host:port", "ip", "[v6]:port"),
/// else the first address of the interface NLCCL_SOCKET_IFNAME, else 127.0.0.1; port 0 means
/// ephemeral. Secret left zero.
Status listenEndpointFromEnv(Endpoint* ep);

/// A random 64-bit value from /dev/urandom (std::random_device as fallback); never zero.
uint64_t randomSecret();

/// hostname + ":" + boot id (/proc/sys/kernel/random/boot_id), for same-host decisions.
std::string hostIdentity();

/// Bootstrap timeout: `requestedMs` if positive, else NLCCL_TIMEOUT_MS, else 300000.
int64_t resolveTimeoutMs(int64_t requestedMs);

}  // namespace nlccl::bootstrap
