// The MoE routing generator (nlccl/moe.hpp): expert weights from the distribution, each token's
// top-k experts (sampled or expected), capacity per (rank, expert) in token order, and the
// dispatch matrix with one copy per destination rank of a token.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "moe/rng.hpp"
#include "nlccl/moe.hpp"

namespace nlccl::moe {
namespace {

Status fail(std::string* error, const std::string& why) {
  if (error) *error = why;
  return Status::InvalidArgument;
}

/// Normalised weights of the E experts. Zipf and hot experts are chosen by a seeded shuffle, the
/// same for every source rank (hot experts are hot for everyone).
Status weightsOf(const Distribution& d, int experts, uint64_t seed, std::vector<double>* w,
                 std::string* error) {
  w->assign(static_cast<size_t>(experts), 1.0);
  std::vector<int> order(static_cast<size_t>(experts));
  std::iota(order.begin(), order.end(), 0);
  Rng rng(seed, ~0ull);
  for (int i = experts - 1; i > 0; --i)
    std::swap(order[i], order[rng.below(static_cast<uint64_t>(i) + 1)]);
  switch (d.kind) {
    case Distribution::Kind::Uniform: break;
    case Distribution::Kind::Zipf:
      for (int k = 0; k < experts; ++k) (*w)[order[k]] = 1.0 / std::pow(k + 1.0, d.s);
      break;
    case Distribution::Kind::Hot:
      if (d.hotExperts < 1 || d.hotExperts > experts || !(d.factor > 0))
        return fail(error, "hot:F:N needs F > 0 and 1 <= N <= experts (" +
                               std::to_string(experts) + ")");
      for (int k = 0; k < d.hotExperts; ++k) (*w)[order[k]] = d.factor;
      break;
    case Distribution::Kind::Loads:
      if (static_cast<int>(d.loads.size()) != experts)
        return fail(error, "the loads give " + std::to_string(d.loads.size()) +
                               " experts, the layer has " + std::to_string(experts));
      for (int e = 0; e < experts; ++e) {
        if (!(d.loads[e] >= 0) || !std::isfinite(d.loads[e]))
          return fail(error, "load of expert " + std::to_string(e) + " is not a finite number >= 0");
        (*w)[e] = d.loads[e];
      }
      break;
  }
  const double sum = std::accumulate(w->begin(), w->end(), 0.0);
  if (!(sum > 0)) return fail(error, "every expert has load 0");
  for (double& x : *w) x /= sum;
  return Status::Success;
}

/// Expected mode: integer choices per expert out of T x k, at most T each (an expert once per
/// token), by largest remainders. The experts tied at the cut-off remainder take the leftover
/// units in turns, rotated by source rank, so that (say) 64 tokens over 288 equal experts do not
/// all go to the first 64 experts from every rank.
class Quotas {
 public:
  Quotas(const std::vector<double>& w, int64_t T, int k) {
    const size_t E = w.size();
    if (E == 0) return;  // not expected mode
    std::vector<double> q(E, 0.0);
    std::vector<char> capped(E, 0);
    double left = static_cast<double>(T) * k;
    for (;;) {  // cap at T and hand the excess to the others in proportion
      double wsum = 0;
      for (size_t e = 0; e < E; ++e)
        if (!capped[e]) wsum += w[e];
      bool again = false;
      for (size_t e = 0; e < E; ++e)
        if (!capped[e]) q[e] = wsum > 0 ? left * w[e] / wsum : 0;
      for (size_t e = 0; e < E; ++e)
        if (!capped[e] && q[e] > static_cast<double>(T)) {
          capped[e] = 1;
          q[e] = static_cast<double>(T);
          left -= static_cast<double>(T);
          again = true;
        }
      if (!again) break;
    }
    base_.resize(E);
    int64_t given = 0;
    std::vector<double> rem(E, -1.0);
    for (size_t e = 0; e < E; ++e) {
      base_[e] = std::min<int64_t>(T, static_cast<int64_t>(std::floor(q[e] + 1e-9)));
      given += base_[e];
      if (base_[e] < T && w[e] > 0) rem[e] = std::max(0.0, q[e] - static_cast<double>(base_[e]));
    }
    int64_t extra = T * k - given;
    std::vector<size_t> order(E);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return rem[a] > rem[b]; });
    if (extra <= 0 || extra > static_cast<int64_t>(E)) return;
    const double cut = rem[order[static_cast<size_t>(extra - 1)]];
    for (size_t e : order) {
      if (rem[e] < 0) continue;
      if (rem[e] > cut + 1e-9) {
        ++base_[e];
        --extra;
      } else if (std::fabs(rem[e] - cut) <= 1e-9) {
        tied_.push_back(static_cast<int>(e));
      }
    }
    need_ = extra;  // units the tied experts share
  }
  /// The choices rank i sends each expert.
  std::vector<int64_t> forRank(int i) const {
    std::vector<int64_t> n = base_;
    const int64_t g = static_cast<int64_t>(tied_.size());
    for (int64_t m = 0; m < need_ && g > 0; ++m)
      ++n[static_cast<size_t>(tied_[static_cast<size_t>((static_cast<int64_t>(i) * need_ + m) % g)])];
    return n;
  }

 private:
  std::vector<int64_t> base_;
  std::vector<int> tied_;
  int64_t need_ = 0;
};

}  // namespace

std::vector<size_t> Routing::matrix(bool combine, size_t elemBytes) const {
  const size_t p = static_cast<size_t>(ranks);
  const size_t perToken = static_cast<size_t>(tokenBytes) / elemBytes;
  std::vector<size_t> m(p * p);
  constexpr size_t kTile = 64;  // the transpose in tiles, so both sides stay in cache
  for (size_t i0 = 0; i0 < p; i0 += kTile)
    for (size_t j0 = 0; j0 < p; j0 += kTile)
      for (size_t i = i0; i < std::min(p, i0 + kTile); ++i)
        for (size_t j = j0; j < std::min(p, j0 + kTile); ++j)
          m[combine ? j * p + i : i * p + j] = static_cast<size_t>(tokens[i * p + j]) * perToken;
  return m;
}

Status placeExperts(Placement placement, int experts, int ranks,
                    const std::vector<int>& explicitRanks, std::vector<int>* out,
                    std::string* error) {
  if (experts < 1 || ranks < 1) return fail(error, "experts and ranks must be >= 1");
  out->resize(static_cast<size_t>(experts));
  for (int e = 0; e < experts; ++e) {
    switch (placement) {
      case Placement::Contiguous:
        (*out)[e] = static_cast<int>(static_cast<int64_t>(e) * ranks / experts);
        break;
      case Placement::RoundRobin: (*out)[e] = e % ranks; break;
      case Placement::Explicit:
        if (static_cast<int>(explicitRanks.size()) != experts)
          return fail(error, "the placement lists " + std::to_string(explicitRanks.size()) +
                                 " experts, the layer has " + std::to_string(experts));
        if (explicitRanks[e] < 0 || explicitRanks[e] >= ranks)
          return fail(error, "expert " + std::to_string(e) + " is placed on rank " +
                                 std::to_string(explicitRanks[e]) + ", outside 0.." +
                                 std::to_string(ranks - 1));
        (*out)[e] = explicitRanks[e];
        break;
    }
  }
  return Status::Success;
}

Status generateRouting(const RoutingSpec& s, Routing* out, std::string* error) {
  if (s.ranks < 1) return fail(error, "ranks must be >= 1");
  if (s.tokensPerRank < 0 || s.tokensPerRank > UINT32_MAX)
    return fail(error, "tokens per rank must be in 0..2^32-1");
  if (s.hidden < 1 || s.bytesPerElement < 1) return fail(error, "hidden and dtype size must be >= 1");
  if (s.experts < 1) return fail(error, "experts must be >= 1");
  if (s.topk < 1 || s.topk > s.experts)
    return fail(error, "top-k must be in 1.." + std::to_string(s.experts) + " (the experts)");
  if (s.capacityFactor < 0 || std::isnan(s.capacityFactor))
    return fail(error, "capacity factor must be >= 0 (0: no capacity)");
  Routing r;
  r.ranks = s.ranks;
  r.experts = s.experts;
  r.tokenBytes = s.hidden * s.bytesPerElement;
  NLCCL_MOE_CHECK(placeExperts(s.placement, s.experts, s.ranks, s.expertRank, &r.expertRank, error));
  NLCCL_MOE_CHECK(weightsOf(s.dist, s.experts, s.seed, &r.expertWeight, error));
  const int E = s.experts, k = s.topk, p = s.ranks;
  const int64_t T = s.tokensPerRank;
  const int positive = static_cast<int>(
      std::count_if(r.expertWeight.begin(), r.expertWeight.end(), [](double x) { return x > 0; }));
  if (positive < k)
    return fail(error, "top-k " + std::to_string(k) + " needs as many experts with load; " +
                           std::to_string(positive) + " have any");
  if (s.capacityFactor > 0 && std::isfinite(s.capacityFactor))
    r.capacity = std::min<int64_t>(
        T, static_cast<int64_t>(std::ceil(static_cast<double>(T) * k * s.capacityFactor / E - 1e-9)));
  r.tokens.assign(static_cast<size_t>(p) * p, 0);
  r.expertTokens.assign(static_cast<size_t>(E), 0);
  r.assignments = static_cast<int64_t>(p) * T * k;

  // Expected mode: the choices laid out expert by expert; token t takes positions t, t+T, ...,
  // t+(k-1)T, which fall in k different experts because no expert has more than T of them.
  std::vector<int> layout;
  const Quotas quotas(s.sampling == Sampling::Expected ? r.expertWeight : std::vector<double>{}, T,
                      k);
  const AliasTable alias(r.expertWeight);
  std::vector<int64_t> taken(static_cast<size_t>(E));
  std::vector<int> chosen(static_cast<size_t>(k)), dest;
  dest.reserve(static_cast<size_t>(k));
  for (int i = 0; i < p; ++i) {
    std::fill(taken.begin(), taken.end(), 0);
    Rng rng(s.seed, static_cast<uint64_t>(i));
    uint32_t* row = &r.tokens[static_cast<size_t>(i) * p];
    if (s.sampling == Sampling::Expected) {
      const std::vector<int64_t> n = quotas.forRank(i);
      layout.clear();
      for (int e = 0; e < E; ++e) layout.insert(layout.end(), static_cast<size_t>(n[e]), e);
    }
    for (int64_t t = 0; t < T; ++t) {
      if (s.sampling == Sampling::Expected) {
        for (int j = 0; j < k; ++j) chosen[j] = layout[static_cast<size_t>(t + j * T)];
      } else {
        sampleDistinct(alias, r.expertWeight, rng, k, &chosen);
      }
      dest.clear();
      int kept = 0;
      for (int j = 0; j < k; ++j) {
        const int e = chosen[j];
        if (r.capacity >= 0 && taken[e] >= r.capacity) {
          ++r.droppedAssignments;
          continue;
        }
        ++taken[e];
        ++kept;
        ++r.expertTokens[e];
        const int to = r.expertRank[e];
        if (std::find(dest.begin(), dest.end(), to) == dest.end()) dest.push_back(to);
        else ++r.dedupSaved;
      }
      if (kept == 0) ++r.droppedTokens;
      for (int to : dest) ++row[to];
    }
  }
  *out = std::move(r);
  return Status::Success;
}

}  // namespace nlccl::moe
