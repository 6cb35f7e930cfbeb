// Which source addresses the bootstrap root accepts connections from: NLCCL_BOOTSTRAP_ALLOW, a
// comma-separated list of CIDRs ("127.0.0.0/8,10.0.0.0/16,fd00::/8"; a bare address is a /32 or
// /128), or by default the subnet of the interface the root listens on (loopback when it listens on
// loopback, every interface's subnet when it listens on the wildcard address).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "bootstrap/unique_id.hpp"
#include "util/status.hpp"

namespace nlccl::bootstrap {

/// One network: the addresses whose first `prefix` bits equal `addr`'s.
struct Cidr {
  bool ipv6 = false;
  std::array<uint8_t, 16> addr{};  ///< IPv4 in the first 4 bytes, host bits zero
  int prefix = 0;

  /// "10.0.0.0/16", "fd00::/8".
  std::string toString() const;
};

class AllowList {
 public:
  /// Parses "cidr[,cidr...]" (spaces around entries ignored). False with `why` naming the first
  /// bad entry; host bits below the prefix are cleared ("10.1.2.3/16" means 10.1.0.0/16).
  static bool parse(std::string_view text, AllowList* out, std::string* why);
  /// The default for a root listening on `listen` (see the file comment).
  static AllowList defaultFor(const Endpoint& listen);

  /// True when the peer address (4 or 16 bytes, network order) is inside an entry. An IPv4-mapped
  /// IPv6 address (::ffff:a.b.c.d) is matched as the IPv4 address it carries.
  bool allows(bool ipv6, const uint8_t* addr) const;
  /// "127.0.0.0/8,::1/128".
  std::string toString() const;

  std::vector<Cidr> entries;
};

/// The root's allow list: NLCCL_BOOTSTRAP_ALLOW if set and not empty (InvalidArgument with a WARN
/// naming the bad entry if it does not parse), else AllowList::defaultFor(listen). The only place
/// the variable is read.
Status allowListFromEnv(const Endpoint& listen, AllowList* out);

}  // namespace nlccl::bootstrap
