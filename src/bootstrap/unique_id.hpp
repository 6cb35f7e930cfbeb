// The 128-byte unique id that names a bootstrap root (address + port + random 128-bit secret), how
// the root's listen address is chosen from the environment, and the host identity used for "same
// host". The id is a capability: whoever holds it can join (docs/security.md).
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

/// The key both sides of the bootstrap handshake prove they hold; never sent on the wire.
using Secret = std::array<uint8_t, 16>;

/// Decoded form of a UniqueId.
struct Endpoint {
  bool ipv6 = false;
  std::array<uint8_t, 16> addr{};  ///< IPv4 uses the first 4 bytes (network order)
  uint16_t port = 0;
  Secret secret{};

  /// "127.0.0.1:41234" or "[::1]:41234".
  std::string toString() const;
};

constexpr uint32_t kIdMagic = 0x4449434eu;  // "NCID"
/// 2: 128-bit secret and challenge-response handshake (1 sent a 64-bit secret in the hello).
constexpr uint16_t kIdVersion = 2;

/// Writes magic, version, address, port and secret; the rest of the id is zero.
void encodeUniqueId(const Endpoint& ep, UniqueId* id);
/// Checks magic, version, family and the zero tail; InvalidArgument with a message otherwise.
Status decodeUniqueId(const UniqueId& id, Endpoint* ep);

/// The address createUniqueId listens on: NLCCL_BOOTSTRAP_ADDR ("host:port", "ip", "[v6]:port"),
/// else the first address of the interface NLCCL_SOCKET_IFNAME, else 127.0.0.1; port 0 means
/// ephemeral. Secret left zero.
Status listenEndpointFromEnv(Endpoint* ep);

/// hostname + ":" + boot id (/proc/sys/kernel/random/boot_id), for same-host decisions.
std::string hostIdentity();

/// Bootstrap timeout: `requestedMs` if positive, else NLCCL_TIMEOUT_MS, else 300000.
int64_t resolveTimeoutMs(int64_t requestedMs);

}  // namespace nlccl::bootstrap
