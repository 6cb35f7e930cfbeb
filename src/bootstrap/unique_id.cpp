#include "bootstrap/unique_id.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cinttypes>
#include <fstream>

#include "util/log.hpp"
#include "util/params.hpp"

namespace nlccl::bootstrap {

namespace {

// Layout (version 2; docs/security.md repeats it). Offsets in bytes, integers in host order
// unless said otherwise; the id only travels between processes of one job, like NCCL's.
//   0  magic u32 "NCID"      4  version u16 (2)      6  family u16 (4 or 6)
//   8  port u16 (network)   10  zero u16            12  address[16] (IPv4: first 4, network order)
//  28  secret[16] (random, the HMAC key)            44  zeros up to 128 (checked on decode)
constexpr size_t kOffMagic = 0, kOffVersion = 4, kOffFamily = 6, kOffPort = 8, kOffAddr = 12,
                 kOffSecret = 28, kOffTail = 44;

bool parsePort(const std::string& s, uint16_t* port) {
  if (s.empty() || s.size() > 5) return false;
  unsigned long v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<unsigned long>(c - '0');
  }
  if (v > 65535) return false;
  *port = static_cast<uint16_t>(v);
  return true;
}

/// Resolves a numeric address or host name (first result) into `ep`.
bool resolveHost(const std::string& host, Endpoint* ep) {
  in_addr a4;
  in6_addr a6;
  if (inet_pton(AF_INET, host.c_str(), &a4) == 1) {
    ep->ipv6 = false;
    ep->addr.fill(0);
    memcpy(ep->addr.data(), &a4, 4);
    return true;
  }
  if (inet_pton(AF_INET6, host.c_str(), &a6) == 1) {
    ep->ipv6 = true;
    memcpy(ep->addr.data(), &a6, 16);
    return true;
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || res == nullptr) return false;
  bool ok = false;
  for (addrinfo* r = res; r && !ok; r = r->ai_next) {
    if (r->ai_family == AF_INET) {
      ep->ipv6 = false;
      ep->addr.fill(0);
      memcpy(ep->addr.data(), &reinterpret_cast<sockaddr_in*>(r->ai_addr)->sin_addr, 4);
      ok = true;
    } else if (r->ai_family == AF_INET6) {
      ep->ipv6 = true;
      memcpy(ep->addr.data(), &reinterpret_cast<sockaddr_in6*>(r->ai_addr)->sin6_addr, 16);
      ok = true;
    }
  }
  freeaddrinfo(res);
  return ok;
}

Status parseBootstrapAddr(const std::string& s, Endpoint* ep) {
  std::string host = s;
  std::string port;
  if (!s.empty() && s[0] == '[') {  // [v6]:port
    size_t close = s.find(']');
    if (close == std::string::npos) goto bad;
    host = s.substr(1, close - 1);
    if (close + 1 < s.size()) {
      if (s[close + 1] != ':') goto bad;
      port = s.substr(close + 2);
    }
  } else if (std::count(s.begin(), s.end(), ':') == 1) {  // host:port (a bare v6 has several)
    size_t colon = s.find(':');
    host = s.substr(0, colon);
    port = s.substr(colon + 1);
  }
  ep->port = 0;
  if (!port.empty() && !parsePort(port, &ep->port)) goto bad;
  if (host.empty() || !resolveHost(host, ep)) goto bad;
  return Status::Success;
bad:
  WARN("bootstrap: cannot parse NLCCL_BOOTSTRAP_ADDR=\"%s\" (want host:port, ip or [ipv6]:port)",
       s.c_str());
  return Status::InvalidArgument;
}

Status interfaceAddress(const std::string& name, Endpoint* ep) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) {
    WARN("bootstrap: getifaddrs failed: %s", strerror(errno));
    return Status::SystemError;
  }
  bool found4 = false, found6 = false;
  Endpoint v6;
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || name != i->ifa_name) continue;
    if (i->ifa_addr->sa_family == AF_INET && !found4) {
      ep->ipv6 = false;
      ep->addr.fill(0);
      memcpy(ep->addr.data(), &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, 4);
      found4 = true;
    } else if (i->ifa_addr->sa_family == AF_INET6 && !found6) {
      auto* s6 = reinterpret_cast<sockaddr_in6*>(i->ifa_addr);
      if (IN6_IS_ADDR_LINKLOCAL(&s6->sin6_addr)) continue;  // needs a scope id; skip
      v6.ipv6 = true;
      memcpy(v6.addr.data(), &s6->sin6_addr, 16);
      found6 = true;
    }
  }
  freeifaddrs(list);
  if (!found4 && found6) {
    ep->ipv6 = true;
    ep->addr = v6.addr;
  }
  if (!found4 && !found6) {
    WARN("bootstrap: NLCCL_SOCKET_IFNAME=%s: no such interface with an IP address", name.c_str());
    return Status::InvalidArgument;
  }
  return Status::Success;
}

}  // namespace

std::string Endpoint::toString() const {
  char buf[INET6_ADDRSTRLEN] = {0};
  inet_ntop(ipv6 ? AF_INET6 : AF_INET, addr.data(), buf, sizeof(buf));
  return ipv6 ? "[" + std::string(buf) + "]:" + std::to_string(port)
              : std::string(buf) + ":" + std::to_string(port);
}

void encodeUniqueId(const Endpoint& ep, UniqueId* id) {
  memset(id->bytes, 0, sizeof(id->bytes));
  uint32_t magic = kIdMagic;
  uint16_t version = kIdVersion, family = ep.ipv6 ? 6 : 4, port = htons(ep.port);
  memcpy(id->bytes + kOffMagic, &magic, 4);
  memcpy(id->bytes + kOffVersion, &version, 2);
  memcpy(id->bytes + kOffFamily, &family, 2);
  memcpy(id->bytes + kOffPort, &port, 2);
  memcpy(id->bytes + kOffAddr, ep.addr.data(), 16);
  memcpy(id->bytes + kOffSecret, ep.secret.data(), ep.secret.size());
}

Status decodeUniqueId(const UniqueId& id, Endpoint* ep) {
  uint32_t magic;
  uint16_t version, family, port;
  memcpy(&magic, id.bytes + kOffMagic, 4);
  memcpy(&version, id.bytes + kOffVersion, 2);
  memcpy(&family, id.bytes + kOffFamily, 2);
  memcpy(&port, id.bytes + kOffPort, 2);
  if (magic != kIdMagic) {
    WARN("bootstrap: unique id has a bad magic (not made by nlcclGetUniqueId?)");
    return Status::InvalidArgument;
  }
  if (version != kIdVersion) {
    WARN("bootstrap: unique id version %u, this library speaks %u", version, kIdVersion);
    return Status::InvalidArgument;
  }
  if (family != 4 && family != 6) {
    WARN("bootstrap: unique id has an unknown address family %u", family);
    return Status::InvalidArgument;
  }
  if (id.bytes[kOffPort + 2] != 0 || id.bytes[kOffPort + 3] != 0) {
    WARN("bootstrap: unique id is corrupt (nonzero padding)");
    return Status::InvalidArgument;
  }
  for (size_t i = kOffTail; i < sizeof(id.bytes); ++i) {
    if (id.bytes[i] != 0) {
      WARN("bootstrap: unique id is corrupt (nonzero byte %zu)", i);
      return Status::InvalidArgument;
    }
  }
  ep->ipv6 = family == 6;
  ep->port = ntohs(port);
  memcpy(ep->addr.data(), id.bytes + kOffAddr, 16);
  memcpy(ep->secret.data(), id.bytes + kOffSecret, ep->secret.size());
  if (ep->port == 0) {
    WARN("bootstrap: unique id has port 0");
    return Status::InvalidArgument;
  }
  if (ep->secret == Secret{}) {
    WARN("bootstrap: unique id has an all-zero secret (corrupt)");
    return Status::InvalidArgument;
  }
  return Status::Success;
}

Status listenEndpointFromEnv(Endpoint* ep) {
  *ep = Endpoint{};
  ep->addr[0] = 127;
  ep->addr[3] = 1;
  const Param<std::string> addr = paramBootstrapAddr();
  if (addr.set) return parseBootstrapAddr(addr.value.c_str(), ep);
  const Param<std::string> ifname = paramSocketIfname();
  if (ifname.set) return interfaceAddress(ifname.value.c_str(), ep);
  return Status::Success;
}

std::string hostIdentity() {
  // NLCCL_HOSTID stands one machine in for several hosts (tests), or names hosts explicitly.
  if (const Param<std::string> id = paramHostId(); id.set) return "id:" + id.value;
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  std::string boot;
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::getline(f, boot);
  return std::string(host) + ":" + boot;
}

int64_t resolveTimeoutMs(int64_t requestedMs) {
  if (requestedMs > 0) return requestedMs;
  const Param<int64_t> env = paramTimeoutMs();
  if (env.value > 0) return env.value;
  WARN("bootstrap: ignoring NLCCL_TIMEOUT_MS=%" PRId64 " (want a positive integer)", env.value);
  return 300000;
}

}  // namespace nlccl::bootstrap
