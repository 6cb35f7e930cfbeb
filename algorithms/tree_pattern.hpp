// Transport-free peer arithmetic for tree algorithms: NCCL's double binary tree and binomial trees.
#pragma once

namespace nlccl::algo::tree {

/// One node's links in a tree over ranks 0..n-1 (-1: none).
struct Links {
  int parent = -1;
  int child[2] = {-1, -1};
  int children() const { return (child[0] >= 0) + (child[1] >= 0); }
};

/// The in-order binary tree NCCL builds (ncclGetBtree): rank r with lowest set bit b has children
/// r - b/2 and r + b/2 (the latter pulled down while out of range); rank 0 is the root with one
/// child, the largest power of two below n.
inline Links binaryTree(int n, int r) {
  Links l;
  int bit = 1;
  while (bit < n && !(bit & r)) bit <<= 1;
  if (r == 0) {
    if (n > 1) l.child[0] = bit >> 1;
    return l;
  }
  int up = (r ^ bit) | (bit << 1);
  if (up >= n) up = r ^ bit;
  l.parent = up;
  int low = bit >> 1;
  if (low > 0) l.child[0] = r - low;
  while (low > 0 && r + low >= n) low >>= 1;
  if (low > 0) l.child[1] = r + low;
  return l;
}

/// Tree `which` (0 or 1) of NCCL's double binary tree (ncclGetDtree): tree 0 is binaryTree; tree 1
/// mirrors it (n even) or shifts it by one (n odd), so that a rank that is interior in one tree is
/// a leaf in the other and each rank sends about the same amount in total.
inline Links doubleTree(int n, int r, int which) {
  if (which == 0) return binaryTree(n, r);
  auto map = [n](int x, bool shift) {
    if (x < 0) return -1;
    return shift ? (x + 1) % n : n - 1 - x;
  };
  const bool shift = n % 2 == 1;
  const Links t = binaryTree(n, shift ? (r - 1 + n) % n : n - 1 - r);
  Links l;
  l.parent = map(t.parent, shift);
  l.child[0] = map(t.child[0], shift);
  l.child[1] = map(t.child[1], shift);
  return l;
}

/// Depth (edges from the root to the deepest leaf) of a tree given by a links function.
template <typename F>
int depth(int n, F links) {
  int best = 0;
  for (int r = 0; r < n; ++r) {
    int d = 0;
    for (int x = r; links(x).parent >= 0; x = links(x).parent) ++d;
    if (d > best) best = d;
  }
  return best;
}

/// ceil(log2(n)) for n >= 1.
inline int ceilLog2(int n) {
  int k = 0;
  while ((1 << k) < n) ++k;
  return k;
}

/// Largest power of two <= n (n >= 1).
inline int floorPow2(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

}  // namespace nlccl::algo::tree
