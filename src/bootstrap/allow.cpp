#include "bootstrap/allow.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "util/log.hpp"
#include "util/params.hpp"

namespace nlccl::bootstrap {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

/// Clears every bit of `c.addr` below the prefix.
void maskHostBits(Cidr* c) {
  const int bits = c->ipv6 ? 128 : 32;
  for (int i = 0; i < bits / 8; ++i) {
    int keep = std::clamp(c->prefix - 8 * i, 0, 8);
    c->addr[i] &= static_cast<uint8_t>(0xff00u >> keep);
  }
}

bool parseEntry(std::string_view text, Cidr* out) {
  std::string_view host = text, len;
  if (size_t slash = text.find('/'); slash != std::string_view::npos) {
    host = text.substr(0, slash);
    len = text.substr(slash + 1);
  }
  std::string h(host);
  Cidr c;
  if (inet_pton(AF_INET, h.c_str(), c.addr.data()) == 1) {
    c.ipv6 = false;
  } else if (inet_pton(AF_INET6, h.c_str(), c.addr.data()) == 1) {
    c.ipv6 = true;
  } else {
    return false;
  }
  const int bits = c.ipv6 ? 128 : 32;
  c.prefix = bits;
  if (text.find('/') != std::string_view::npos) {
    if (len.empty() || len.size() > 3) return false;
    int v = 0;
    for (char ch : len) {
      if (ch < '0' || ch > '9') return false;
      v = v * 10 + (ch - '0');
    }
    if (v > bits) return false;
    c.prefix = v;
  }
  maskHostBits(&c);
  *out = c;
  return true;
}

bool isLoopback(const Endpoint& ep) {
  if (!ep.ipv6) return ep.addr[0] == 127;
  static const std::array<uint8_t, 16> kV6Loopback = {0, 0, 0, 0, 0, 0, 0, 0,
                                                      0, 0, 0, 0, 0, 0, 0, 1};
  return ep.addr == kV6Loopback;
}

bool isUnspecified(const Endpoint& ep) {
  for (int i = 0; i < (ep.ipv6 ? 16 : 4); ++i)
    if (ep.addr[i] != 0) return false;
  return true;
}

/// Prefix length of a contiguous netmask.
int prefixOf(const uint8_t* mask, int bytes) {
  int n = 0;
  for (int i = 0; i < bytes; ++i)
    for (int b = 7; b >= 0; --b) {
      if ((mask[i] >> b & 1) == 0) return n;
      ++n;
    }
  return n;
}

/// The subnets of the interface holding `listen`'s address, or of every interface when `listen` is
/// the wildcard address.
std::vector<Cidr> interfaceSubnets(const Endpoint& listen) {
  std::vector<Cidr> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  const bool any = isUnspecified(listen);
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_netmask == nullptr) continue;
    Cidr c;
    const uint8_t* a = nullptr;
    const uint8_t* m = nullptr;
    if (i->ifa_addr->sa_family == AF_INET) {
      a = reinterpret_cast<const uint8_t*>(&reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr);
      m = reinterpret_cast<const uint8_t*>(
          &reinterpret_cast<sockaddr_in*>(i->ifa_netmask)->sin_addr);
      c.ipv6 = false;
    } else if (i->ifa_addr->sa_family == AF_INET6) {
      a = reinterpret_cast<const uint8_t*>(
          &reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr);
      m = reinterpret_cast<const uint8_t*>(
          &reinterpret_cast<sockaddr_in6*>(i->ifa_netmask)->sin6_addr);
      c.ipv6 = true;
    } else {
      continue;
    }
    const int bytes = c.ipv6 ? 16 : 4;
    // The wildcard listens on both families (v6 sockets accept v4-mapped peers).
    if (!any && (c.ipv6 != listen.ipv6 || memcmp(a, listen.addr.data(), bytes) != 0)) continue;
    memcpy(c.addr.data(), a, bytes);
    c.prefix = prefixOf(m, bytes);
    maskHostBits(&c);
    out.push_back(c);
  }
  freeifaddrs(list);
  return out;
}

}  // namespace

std::string Cidr::toString() const {
  char buf[INET6_ADDRSTRLEN] = {0};
  inet_ntop(ipv6 ? AF_INET6 : AF_INET, addr.data(), buf, sizeof(buf));
  return std::string(buf) + "/" + std::to_string(prefix);
}

bool AllowList::parse(std::string_view text, AllowList* out, std::string* why) {
  AllowList list;
  size_t pos = 0;
  for (;;) {
    size_t comma = text.find(',', pos);
    std::string_view entry = trim(text.substr(pos, comma == std::string_view::npos
                                                       ? std::string_view::npos
                                                       : comma - pos));
    Cidr c;
    if (!parseEntry(entry, &c)) {
      if (why) *why = "bad entry \"" + std::string(entry) + "\"";
      return false;
    }
    list.entries.push_back(c);
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  *out = std::move(list);
  return true;
}

AllowList AllowList::defaultFor(const Endpoint& listen) {
  AllowList list;
  if (isLoopback(listen)) {
    std::string ignored;
    parse("127.0.0.0/8,::1/128", &list, &ignored);
    return list;
  }
  list.entries = interfaceSubnets(listen);
  if (list.entries.empty()) {  // not an interface address: the address itself, at least
    Cidr c;
    c.ipv6 = listen.ipv6;
    c.addr = listen.addr;
    c.prefix = listen.ipv6 ? 128 : 32;
    list.entries.push_back(c);
  }
  return list;
}

bool AllowList::allows(bool ipv6, const uint8_t* addr) const {
  std::array<uint8_t, 16> a{};
  static const uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (ipv6 && memcmp(addr, kMapped, 12) == 0) {
    ipv6 = false;
    memcpy(a.data(), addr + 12, 4);
  } else {
    memcpy(a.data(), addr, ipv6 ? 16 : 4);
  }
  for (const Cidr& c : entries) {
    if (c.ipv6 != ipv6) continue;
    Cidr peer;
    peer.ipv6 = ipv6;
    peer.addr = a;
    peer.prefix = c.prefix;
    maskHostBits(&peer);
    if (peer.addr == c.addr) return true;
  }
  return false;
}

std::string AllowList::toString() const {
  std::string s;
  for (size_t i = 0; i < entries.size(); ++i) s += (i ? "," : "") + entries[i].toString();
  return s;
}

Status allowListFromEnv(const Endpoint& listen, AllowList* out) {
  const char* text = paramBootstrapAllowText();
  if (text == nullptr || trim(text).empty()) {
    *out = AllowList::defaultFor(listen);
    return Status::Success;
  }
  std::string why;
  if (!AllowList::parse(text, out, &why)) {
    WARN("bootstrap: NLCCL_BOOTSTRAP_ALLOW=\"%s\": %s (want comma-separated CIDRs such as "
         "127.0.0.0/8,10.0.0.0/16)",
         text, why.c_str());
    return Status::InvalidArgument;
  }
  INFO(log::kEnv, "NLCCL_BOOTSTRAP_ALLOW set by environment to %s", text);
  return Status::Success;
}

}  // namespace nlccl::bootstrap
