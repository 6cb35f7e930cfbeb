#include "core/prepared.hpp"

namespace nlccl::core {

uint64_t PreparedKey::hash() const {
  // splitmix64 over the fields; cheap and well mixed for the few hundred keys a program uses.
  auto mix = [](uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  uint64_t h = mix(count);
  h = mix(h ^ (static_cast<uint64_t>(collective) | static_cast<uint64_t>(dtype) << 8 |
               static_cast<uint64_t>(op) << 16 | static_cast<uint64_t>(inPlace) << 24 |
               static_cast<uint64_t>(static_cast<uint32_t>(root)) << 32));
  return h;
}

PreparedTable::PreparedTable() : slots_(new std::atomic<Prepared*>[kSlots]) {
  for (size_t i = 0; i < kSlots; ++i) slots_[i].store(nullptr, std::memory_order_relaxed);
}

PreparedTable::~PreparedTable() {
  for (size_t i = 0; i < kSlots; ++i) delete slots_[i].load(std::memory_order_relaxed);
}

Prepared* PreparedTable::find(const PreparedKey& key) const {
  if (Prepared* e = last_.load(std::memory_order_acquire); e != nullptr && e->key == key) return e;
  for (size_t i = key.hash() & (kSlots - 1);; i = (i + 1) & (kSlots - 1)) {
    Prepared* e = slots_[i].load(std::memory_order_acquire);
    if (e == nullptr) return nullptr;  // at most half full: an empty slot always ends a probe
    if (e->key == key) {
      last_.store(e, std::memory_order_release);
      return e;
    }
  }
}

Prepared* PreparedTable::insert(std::unique_ptr<Prepared> entry) {
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = entry->key.hash() & (kSlots - 1);; i = (i + 1) & (kSlots - 1)) {
    Prepared* e = slots_[i].load(std::memory_order_relaxed);
    if (e != nullptr) {
      if (e->key == entry->key) return e;
      continue;
    }
    if (used_ >= kSlots / 2) return nullptr;
    ++used_;
    Prepared* p = entry.release();
    slots_[i].store(p, std::memory_order_release);
    return p;
  }
}

size_t PreparedTable::trimScratch() {
  size_t freed = 0;
  for (size_t i = 0; i < kSlots; ++i) {
    Prepared* e = slots_[i].load(std::memory_order_acquire);
    if (e == nullptr || e->busy.exchange(true, std::memory_order_acquire)) continue;
    if (e->scratch) {
      freed += e->scratchBytes;
      e->scratch.reset();
      e->kept.store(0, std::memory_order_relaxed);
    }
    e->busy.store(false, std::memory_order_release);
  }
  return freed;
}

size_t PreparedTable::keptBytes() const {
  size_t n = 0;
  for (size_t i = 0; i < kSlots; ++i) {
    Prepared* e = slots_[i].load(std::memory_order_acquire);
    if (e != nullptr) n += e->kept.load(std::memory_order_relaxed);
  }
  return n;
}

}  // namespace nlccl::core
