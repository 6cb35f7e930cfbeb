// Public C++ API of the MoE routing generator (DESIGN.md section 6, "MoE studies"): turns a
// mixture-of-experts layer's routing (tokens per rank, hidden size, top-k, experts, placement,
// capacity, load distribution) into the dispatch and combine traffic matrices of its
// all-to-all-v. Pure code, no fabric: nlccl-sim moe simulates the matrices (nlccl/moe_study.hpp),
// nlccl-perf --moe runs them for real. Link with nlccl::sim.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "nlccl/export.hpp"
#include "nlccl/status.hpp"

namespace nlccl::moe {

/// How experts are spread over ranks.
enum class Placement : uint8_t {
  Contiguous,  ///< expert e on rank floor(e * ranks / experts): blocks of consecutive experts
  RoundRobin,  ///< expert e on rank e % ranks
  Explicit,    ///< RoutingSpec::expertRank (e.g. read from a file by readPlacement)
};

/// The share of tokens each expert is chosen for, before top-k and capacity.
struct Distribution {
  enum class Kind : uint8_t {
    Uniform,  ///< every expert alike
    Zipf,     ///< weight 1 / k^s for the expert of popularity rank k (ranks shuffled by the seed)
    Hot,      ///< `hotExperts` experts (chosen by the seed) weigh `factor` times the others
    Loads,    ///< per-expert weights (`loads`, e.g. from a CSV file)
  };
  Kind kind = Kind::Uniform;
  double s = 0;             ///< Zipf exponent (0 is uniform)
  double factor = 1;        ///< Hot: F
  int hotExperts = 1;       ///< Hot: N
  std::vector<double> loads;  ///< Loads: one non-negative weight per expert
};

/// Parses `uniform`, `zipf:S`, `hot:F[:N]`, or the path of a CSV file of per-expert loads (one
/// number per line or comma-separated; a line `expert,load` takes the last field; `#` comments).
NLCCL_MODEL_API Status parseDistribution(const std::string& text, Distribution* out,
                                         std::string* error);
/// "uniform", "zipf:0.5", "hot:4:2", "loads(256)".
NLCCL_MODEL_API std::string distributionName(const Distribution& d);

/// How tokens pick their experts.
enum class Sampling : uint8_t {
  /// Each token draws top-k distinct experts at random, weighted by the distribution (seeded):
  /// what a router does, with its noise.
  Random,
  /// Every rank sends each expert its expected share of the T x top-k choices (largest
  /// remainders, an expert at most once per token): no noise, so skew alone shows, and uniform
  /// loads on evenly placed experts give an exactly uniform matrix.
  Expected,
};

struct RoutingSpec {
  int ranks = 0;
  int64_t tokensPerRank = 0;  ///< T
  int64_t hidden = 0;         ///< elements per token
  int bytesPerElement = 2;    ///< bf16
  int topk = 1;
  int experts = 0;            ///< E
  Placement placement = Placement::Contiguous;
  std::vector<int> expertRank;  ///< Explicit: the rank of each of the E experts
  /// Capacity factor CF: each expert takes at most C = min(T, ceil(T * topk * CF / E)) tokens
  /// from each rank (GShard's per-group capacity; REFERENCE.md section 4); the rest are dropped,
  /// in token order. 0 (or infinity): no capacity.
  double capacityFactor = 0;
  Distribution dist;
  Sampling sampling = Sampling::Random;
  uint64_t seed = 1;
};

/// The routing of one MoE layer and its traffic. Dispatch sends a token once to each rank that
/// holds one of its (kept) experts; combine sends the results back the same way, so the combine
/// matrix is the dispatch matrix transposed.
struct Routing {
  int ranks = 0;
  int experts = 0;
  int64_t tokenBytes = 0;   ///< hidden x bytes per element
  int64_t capacity = -1;    ///< C per (rank, expert); -1: none
  std::vector<int> expertRank;         ///< rank of each expert
  std::vector<double> expertWeight;    ///< the distribution's normalised weights
  /// tokens[i * ranks + j]: tokens rank i sends rank j in dispatch (deduplicated per rank).
  std::vector<uint32_t> tokens;
  std::vector<int64_t> expertTokens;   ///< tokens each expert receives (after capacity)
  int64_t assignments = 0;         ///< token-expert choices: ranks x T x topk
  int64_t droppedAssignments = 0;  ///< choices over an expert's capacity ("dropped tokens")
  int64_t droppedTokens = 0;       ///< tokens that lost every one of their experts
  int64_t dedupSaved = 0;          ///< copies saved because two experts of a token share a rank

  uint64_t dispatchBytes(int i, int j) const {
    return static_cast<uint64_t>(tokens[static_cast<size_t>(i) * ranks + j]) * tokenBytes;
  }
  uint64_t combineBytes(int i, int j) const { return dispatchBytes(j, i); }
  /// The all-to-all-v matrix in elements of `elemBytes` (row-major, p x p): dispatch, or combine
  /// (transposed). tokenBytes must be a multiple of elemBytes.
  NLCCL_MODEL_API std::vector<size_t> matrix(bool combine, size_t elemBytes) const;
};

/// The rank of every expert under `placement` (Explicit: `explicitRanks`, checked).
NLCCL_MODEL_API Status placeExperts(Placement placement, int experts, int ranks,
                                    const std::vector<int>& explicitRanks, std::vector<int>* out,
                                    std::string* error);
/// Parses `contiguous`, `round-robin` (or `rr`), or a file with the rank of each expert (one per
/// line or comma-separated; `#` comments), into *placement (and *ranks for a file).
NLCCL_MODEL_API Status parsePlacement(const std::string& text, Placement* placement,
                                      std::vector<int>* ranks, std::string* error);

/// Generates the routing (the same spec and seed give the same matrices). InvalidArgument with
/// *error for a spec that cannot be routed (top-k above the experts with load, ...).
NLCCL_MODEL_API Status generateRouting(const RoutingSpec& spec, Routing* out, std::string* error);

}  // namespace nlccl::moe
