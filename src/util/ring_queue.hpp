// A FIFO of values in one circular buffer that only grows: pushes and pops allocate nothing once
// the queue has been as long as it will be (std::deque allocates and frees a node every few
// hundred elements, for ever). For the hot paths of streams and transports (STYLE.md 8).
#pragma once

#include <cstddef>
#include <iterator>
#include <memory>
#include <utility>

namespace nlccl {

template <typename T>
class RingQueue {
 public:
  RingQueue() = default;
  explicit RingQueue(size_t capacity) { reserve(capacity); }
  RingQueue(RingQueue&&) noexcept = default;
  RingQueue& operator=(RingQueue&&) noexcept = default;

  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  size_t capacity() const { return cap_; }
  /// The i-th element from the front.
  T& operator[](size_t i) { return buf_[(head_ + i) & (cap_ - 1)]; }
  const T& operator[](size_t i) const { return buf_[(head_ + i) & (cap_ - 1)]; }
  T& front() { return (*this)[0]; }
  const T& front() const { return (*this)[0]; }
  T& back() { return (*this)[size_ - 1]; }

  void push_back(T v) {
    if (size_ == cap_) reserve(cap_ ? cap_ * 2 : 8);
    buf_[(head_ + size_) & (cap_ - 1)] = std::move(v);
    ++size_;
  }
  void pop_front() {
    front() = T();  // release what the element holds now, not when the slot is reused
    head_ = (head_ + 1) & (cap_ - 1);
    --size_;
  }
  /// Removes the i-th element, keeping the order of the others.
  void erase(size_t i) {
    for (size_t j = i; j + 1 < size_; ++j) (*this)[j] = std::move((*this)[j + 1]);
    back() = T();
    --size_;
  }
  void clear() {
    while (!empty()) pop_front();
    head_ = 0;
  }
  /// Forward iteration from the front, for std::find_if and range-for; erase(it) as erase(i).
  template <typename Q, typename V>
  struct Iter {
    using iterator_category = std::forward_iterator_tag;
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    using pointer = V*;
    using reference = V&;
    Q* q = nullptr;
    size_t i = 0;
    V& operator*() const { return (*q)[i]; }
    V* operator->() const { return &(*q)[i]; }
    Iter& operator++() {
      ++i;
      return *this;
    }
    Iter operator++(int) {
      Iter t = *this;
      ++i;
      return t;
    }
    friend bool operator==(const Iter& a, const Iter& b) { return a.i == b.i; }
  };
  using iterator = Iter<RingQueue, T>;
  using const_iterator = Iter<const RingQueue, const T>;
  iterator begin() { return {this, 0}; }
  iterator end() { return {this, size_}; }
  const_iterator begin() const { return {this, 0}; }
  const_iterator end() const { return {this, size_}; }
  /// Removes the element at `it`; returns the iterator to the one after it.
  iterator erase(iterator it) {
    erase(it.i);
    return it;
  }

  /// Room for at least `n` elements (a power of two), keeping the contents.
  void reserve(size_t n) {
    if (n <= cap_) return;
    size_t c = 8;
    while (c < n) c *= 2;
    std::unique_ptr<T[]> b(new T[c]);
    for (size_t i = 0; i < size_; ++i) b[i] = std::move((*this)[i]);
    buf_ = std::move(b);
    cap_ = c;
    head_ = 0;
  }

 private:
  std::unique_ptr<T[]> buf_;
  size_t cap_ = 0;  ///< 0 or a power of two
  size_t head_ = 0;
  size_t size_ = 0;
};

}  // namespace nlccl
