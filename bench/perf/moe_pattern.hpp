// nlccl-perf alltoallv --moe SPEC: per-peer sizes from the MoE routing generator (nlccl/moe.hpp)
// instead of the default alternating blocks, so the real library is measured on MoE-shaped
// traffic. Every rank (thread or process) generates the same matrix from the seed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace nlccl::perf {

/// Parses SPEC, a comma list of key=value: tokens (per rank, required), topk (1), experts
/// (default: the rank count), dist (uniform, zipf:S, hot:F[:N], or a CSV of loads), placement
/// (contiguous, round-robin or a file), cf (capacity factor; 0 none), routing (sample or
/// expected), seed (1). False with *why on a bad spec.
bool setMoeSpec(const std::string& spec, std::string* why);
/// True once --moe was given.
bool moeActive();
/// One line for the table's header: the spec and, for `n` ranks, the dropped tokens.
std::string moeDescription(int n);

/// Elements rank `from` sends rank `to` when a rank's mean buffer is `per` x n elements: the
/// tokens it routes there x the elements per token that size gives (at least 1).
size_t moeCount(int from, int to, size_t per, int n);
/// The largest row (send) and column (receive) sums in elements, for the buffers.
size_t moeMaxSend(size_t per, int n);
size_t moeMaxRecv(size_t per, int n);
/// Bytes a send or receive buffer needs for sizes up to maxBytes, whatever the element size.
size_t moeBufferBytes(size_t maxBytes, int n);

}  // namespace nlccl::perf
