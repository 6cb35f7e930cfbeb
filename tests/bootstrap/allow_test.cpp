// NLCCL_BOOTSTRAP_ALLOW: parsing and matching as a unit, the defaults, and the root refusing a
// connection from 127.0.0.2 when only 127.0.0.1 is allowed (loopback only: 127.0.0.0/8 is local).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <cstdlib>

#include "bootstrap/allow.hpp"
#include "bootstrap/helpers.hpp"
#include "bootstrap/raw_peer.hpp"

namespace nlccl::bootstrap {
namespace {

using namespace std::chrono_literals;

bool allows(const AllowList& l, const char* addr) {
  uint8_t b[16] = {};
  if (inet_pton(AF_INET, addr, b) == 1) return l.allows(false, b);
  EXPECT_EQ(inet_pton(AF_INET6, addr, b), 1) << addr;
  return l.allows(true, b);
}

AllowList parsed(const char* text) {
  AllowList l;
  std::string why;
  EXPECT_TRUE(AllowList::parse(text, &l, &why)) << text << ": " << why;
  return l;
}

TEST(BootstrapAllow, ParsesAndMatchesCidrs) {
  AllowList l = parsed("127.0.0.0/8, 10.0.0.0/16 ,192.168.1.5,fd00::/8");
  EXPECT_EQ(l.toString(), "127.0.0.0/8,10.0.0.0/16,192.168.1.5/32,fd00::/8");
  for (const char* yes : {"127.0.0.1", "127.255.0.9", "10.0.0.1", "10.0.255.255", "192.168.1.5",
                          "fd12::1", "::ffff:127.0.0.2", "::ffff:10.0.3.4"})
    EXPECT_TRUE(allows(l, yes)) << yes;
  for (const char* no : {"128.0.0.1", "10.1.0.1", "11.0.0.1", "192.168.1.4", "192.168.1.6",
                         "fe80::1", "::1", "::ffff:10.1.0.1", "::7f00:1"})
    EXPECT_FALSE(allows(l, no)) << no;
  // Host bits below the prefix are cleared; odd prefixes cut inside a byte.
  EXPECT_EQ(parsed("10.1.2.3/16").toString(), "10.1.0.0/16");
  AllowList odd = parsed("10.0.0.128/25");
  EXPECT_TRUE(allows(odd, "10.0.0.200"));
  EXPECT_FALSE(allows(odd, "10.0.0.127"));
  // /0 matches its whole family and nothing of the other.
  AllowList any4 = parsed("0.0.0.0/0");
  EXPECT_TRUE(allows(any4, "203.0.113.7"));
  EXPECT_FALSE(allows(any4, "2001:db8::1"));
  EXPECT_TRUE(allows(parsed("::/0"), "2001:db8::1"));
  EXPECT_TRUE(allows(parsed("::1"), "::1"));
}

TEST(BootstrapAllow, RefusesMalformedLists) {
  for (const char* bad : {"", "abc", "10.0.0/8", "10.0.0.0/33", "10.0.0.0/", "10.0.0.0/8,",
                          ",10.0.0.0/8", "::/129", "1.2.3.4/-1", "1.2.3.4/8x", "10.0.0.0/8;11.0.0.0/8",
                          "1.2.3.4/0008"}) {
    AllowList l;
    std::string why;
    EXPECT_FALSE(AllowList::parse(bad, &l, &why)) << bad;
    EXPECT_NE(why.find("bad entry"), std::string::npos) << bad << ": " << why;
  }
  setenv("NLCCL_BOOTSTRAP_ALLOW", "10.0.0.0/8,nonsense", 1);
  Endpoint lo;
  lo.addr = {127, 0, 0, 1};
  AllowList l;
  log::clearLastError();
  EXPECT_EQ(allowListFromEnv(lo, &l), Status::InvalidArgument);
  EXPECT_NE(log::lastError().find("\"nonsense\""), std::string::npos) << log::lastError();
  // A root is not started on a list that does not parse.
  UniqueId id;
  EXPECT_EQ(createUniqueId(&id), Status::InvalidArgument);
  unsetenv("NLCCL_BOOTSTRAP_ALLOW");
}

TEST(BootstrapAllow, DefaultIsTheListenInterfacesSubnet) {
  Endpoint lo;
  lo.addr = {127, 0, 0, 1};
  EXPECT_EQ(AllowList::defaultFor(lo).toString(), "127.0.0.0/8,::1/128");
  Endpoint lo6;
  lo6.ipv6 = true;
  lo6.addr[15] = 1;
  EXPECT_EQ(AllowList::defaultFor(lo6).toString(), "127.0.0.0/8,::1/128");
  // The wildcard address: every interface's subnet, loopback's included.
  Endpoint any;
  EXPECT_TRUE(allows(AllowList::defaultFor(any), "127.0.0.1"));
  // An interface address: its own subnet (read from this host's configuration, no traffic).
  ifaddrs* list = nullptr;
  ASSERT_EQ(getifaddrs(&list), 0);
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || !i->ifa_netmask || i->ifa_addr->sa_family != AF_INET) continue;
    auto a = reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr;
    auto m = reinterpret_cast<sockaddr_in*>(i->ifa_netmask)->sin_addr.s_addr;
    if ((ntohl(a) >> 24) == 127) continue;
    Endpoint ep;
    memcpy(ep.addr.data(), &a, 4);
    AllowList d = AllowList::defaultFor(ep);
    ASSERT_EQ(d.entries.size(), 1u) << i->ifa_name;
    in_addr net{a & m};
    char buf[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &net, buf, sizeof(buf));
    EXPECT_EQ(d.entries[0].toString(),
              std::string(buf) + "/" + std::to_string(__builtin_popcount(m)))
        << i->ifa_name;
    EXPECT_FALSE(allows(d, "127.0.0.1")) << "loopback allowed by " << i->ifa_name << "'s default";
  }
  freeifaddrs(list);
  // Not an interface address: the address alone.
  Endpoint doc;
  doc.addr = {192, 0, 2, 77};  // TEST-NET-1, never configured
  EXPECT_EQ(AllowList::defaultFor(doc).toString(), "192.0.2.77/32");
}

/// True if this host lets a socket bind 127.0.0.2 (Linux routes all of 127.0.0.0/8 to lo).
bool canBind127002() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  inet_pton(AF_INET, "127.0.0.2", &a.sin_addr);
  bool ok = fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  if (fd >= 0) close(fd);
  return ok;
}

TEST(BootstrapAllow, RootRefusesAddressesOutsideTheList) {
  if (!canBind127002()) GTEST_SKIP() << "cannot bind 127.0.0.2 on this host";
  setenv("NLCCL_BOOTSTRAP_ALLOW", "127.0.0.1/32", 1);
  UniqueId id;
  ASSERT_EQ(createUniqueId(&id), Status::Success);
  unsetenv("NLCCL_BOOTSTRAP_ALLOW");
  Endpoint ep;
  ASSERT_EQ(decodeUniqueId(id, &ep), Status::Success);

  // From 127.0.0.2, even holding the secret: refused before the handshake, and told why.
  test::RawPeer outside(ep.port, "127.0.0.2");
  ASSERT_TRUE(outside.ok());
  wire::Message m;
  ASSERT_TRUE(outside.readFrame(&m));  // the root speaks first here, unasked
  ASSERT_EQ(m.header.type, wire::Type::Error);
  EXPECT_NE(std::string(std::get<wire::ErrorMsg>(m.body).text).find("outside NLCCL_BOOTSTRAP_ALLOW"),
            std::string::npos);
  EXPECT_FALSE(outside.handshake(ep.secret, 0, 1));
  EXPECT_TRUE(outside.closedByRoot());
  RootStats s;
  ASSERT_TRUE(test::waitFor([&] { return rootStats(id, &s) && !s.refusals.empty(); }));
  EXPECT_NE(s.refusals[0].find("refused connection from 127.0.0.2:"), std::string::npos)
      << s.refusals[0];
  EXPECT_NE(s.refusals[0].find("127.0.0.2 is outside NLCCL_BOOTSTRAP_ALLOW"), std::string::npos)
      << s.refusals[0];
  EXPECT_EQ(s.joined, 0);

  // From 127.0.0.1 a real rank joins.
  auto res = test::runRanks(id, 1, {0}, 10s, nullptr);
  EXPECT_EQ(res[0].status, Status::Success) << res[0].error;
}

TEST(BootstrapAllow, LoopbackRootAllowsAllOfLoopbackByDefault) {
  if (!canBind127002()) GTEST_SKIP() << "cannot bind 127.0.0.2 on this host";
  unsetenv("NLCCL_BOOTSTRAP_ALLOW");
  UniqueId id;
  ASSERT_EQ(createUniqueId(&id), Status::Success);
  Endpoint ep;
  ASSERT_EQ(decodeUniqueId(id, &ep), Status::Success);
  {
    test::RawPeer peer(ep.port, "127.0.0.2");
    ASSERT_TRUE(peer.ok());
    bool rootOk = false;
    ASSERT_TRUE(peer.handshake(ep.secret, 0, 1, &rootOk));
    EXPECT_TRUE(rootOk);
    wire::Message m;
    ASSERT_TRUE(peer.readFrame(&m));  // the join's result: rank 0 of 1 is complete
    EXPECT_EQ(m.header.type, wire::Type::Result);
    RootStats s;
    ASSERT_TRUE(rootStats(id, &s));
    EXPECT_EQ(s.joined, 1);
    EXPECT_TRUE(s.refusals.empty()) << s.refusals[0];
    peer.send(wire::encodeGoodbye());
  }
  EXPECT_TRUE(test::rootFinished(id));
}

}  // namespace
}  // namespace nlccl::bootstrap
