#include "moe/rng.hpp"

#include <algorithm>

namespace nlccl::moe {

AliasTable::AliasTable(const std::vector<double>& w) : prob_(w.size()), alias_(w.size()) {
  const size_t n = w.size();
  std::vector<double> scaled(n);
  std::vector<size_t> small, large;
  for (size_t i = 0; i < n; ++i) {
    scaled[i] = w[i] * static_cast<double>(n);
    (scaled[i] < 1.0 ? small : large).push_back(i);
  }
  while (!small.empty() && !large.empty()) {
    const size_t s = small.back(), l = large.back();
    small.pop_back();
    prob_[s] = scaled[s];
    alias_[s] = static_cast<int>(l);
    scaled[l] -= 1.0 - scaled[s];
    if (scaled[l] < 1.0) {
      large.pop_back();
      small.push_back(l);
    }
  }
  for (size_t i : large) prob_[i] = 1.0, alias_[i] = static_cast<int>(i);
  for (size_t i : small) prob_[i] = 1.0, alias_[i] = static_cast<int>(i);  // rounding leftovers
}

void sampleDistinct(const AliasTable& alias, const std::vector<double>& w, Rng& rng, int k,
                    std::vector<int>* out) {
  auto has = [&](int upto, int e) {
    return std::find(out->begin(), out->begin() + upto, e) != out->begin() + upto;
  };
  int got = 0, repeats = 0;
  while (got < k && repeats < 64) {
    const int e = alias.draw(rng);
    if (w[e] > 0 && !has(got, e)) (*out)[got++] = e;
    else ++repeats;
  }
  for (; got < k; ++got) {  // a few heavy experts hold nearly all the weight
    double left = 0;
    for (size_t e = 0; e < w.size(); ++e)
      if (!has(got, static_cast<int>(e))) left += w[e];
    double x = rng.unit() * left;
    int pick = -1;
    for (size_t e = 0; e < w.size(); ++e) {
      if (has(got, static_cast<int>(e)) || w[e] <= 0) continue;
      pick = static_cast<int>(e);
      if ((x -= w[e]) < 0) break;
    }
    (*out)[got] = pick;
  }
}

}  // namespace nlccl::moe
