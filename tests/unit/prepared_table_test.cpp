// The prepared-collective table (src/core/prepared.hpp): lookups find the entry of their own key,
// also when calls alternate between keys (the last-hit shortcut must never answer for another
// key), and a key never inserted is not found.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "core/prepared.hpp"

namespace nlccl::core {
namespace {

PreparedKey key(size_t count, bool inPlace = false) {
  PreparedKey k;
  k.count = count;
  k.inPlace = inPlace;
  return k;
}

Prepared* add(PreparedTable& t, const PreparedKey& k) {
  auto e = std::make_unique<Prepared>();
  e->key = k;
  return t.insert(std::move(e));
}

TEST(PreparedTable, AlternatingLookupsFindTheirOwnEntries) {
  PreparedTable t;
  std::vector<Prepared*> e;
  for (size_t n = 1; n <= 8; ++n) e.push_back(add(t, key(n)));
  Prepared* ip = add(t, key(1, true));  // differs from key(1) in one field only
  for (int round = 0; round < 3; ++round) {
    for (size_t n = 1; n <= 8; ++n) {
      EXPECT_EQ(t.find(key(n)), e[n - 1]);
      EXPECT_EQ(t.find(key(n)), e[n - 1]);  // the same key twice: the shortcut's case
      EXPECT_EQ(t.find(key(1, true)), ip);
    }
    EXPECT_EQ(t.find(key(9)), nullptr);
    EXPECT_EQ(t.find(key(1, true)), ip);
    EXPECT_EQ(t.find(key(2, true)), nullptr);  // right after a hit on a near key
  }
}

TEST(PreparedTable, InsertingAKeyTwiceKeepsTheFirstEntry) {
  PreparedTable t;
  Prepared* first = add(t, key(4));
  EXPECT_EQ(t.find(key(4)), first);
  EXPECT_EQ(add(t, key(4)), first);
  EXPECT_EQ(t.find(key(4)), first);
}

}  // namespace
}  // namespace nlccl::core
