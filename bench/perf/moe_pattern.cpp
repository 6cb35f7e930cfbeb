#include "moe_pattern.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <vector>

#include "nlccl/moe.hpp"

namespace nlccl::perf {
namespace {

struct Pattern {
  moe::Routing routing;
  uint64_t totalTokens = 0;
  uint64_t maxRow = 0, maxCol = 0;
};

struct State {
  bool active = false;
  std::string text;
  moe::RoutingSpec spec;  // ranks and, when not given, experts are set per rank count
  std::mutex mu;
  std::map<int, std::unique_ptr<Pattern>> byRanks;
};

State& state() {
  static State s;
  return s;
}

const Pattern& patternFor(int n) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  auto& slot = s.byRanks[n];
  if (!slot) {
    moe::RoutingSpec sp = s.spec;
    sp.ranks = n;
    if (sp.experts == 0) sp.experts = n;
    slot = std::make_unique<Pattern>();
    std::string err;
    if (moe::generateRouting(sp, &slot->routing, &err) != Status::Success) {
      std::fprintf(stderr, "nlccl-perf: --moe %s: %s\n", s.text.c_str(), err.c_str());
      std::exit(2);
    }
    const auto& t = slot->routing.tokens;
    for (int i = 0; i < n; ++i) {
      uint64_t row = 0, col = 0;
      for (int j = 0; j < n; ++j) {
        row += t[static_cast<size_t>(i) * n + j];
        col += t[static_cast<size_t>(j) * n + i];
      }
      slot->totalTokens += row;
      slot->maxRow = std::max(slot->maxRow, row);
      slot->maxCol = std::max(slot->maxCol, col);
    }
  }
  return *slot;
}

size_t perToken(const Pattern& p, size_t per, int n) {
  if (p.totalTokens == 0) return 1;
  // A rank's mean buffer is per x n elements; the mean row holds totalTokens / n tokens.
  const size_t e = static_cast<size_t>(static_cast<double>(per) * n * n / p.totalTokens);
  return std::max<size_t>(1, e);
}

}  // namespace

bool setMoeSpec(const std::string& text, std::string* why) {
  State& s = state();
  moe::RoutingSpec sp;
  sp.hidden = 1;
  sp.bytesPerElement = 1;
  sp.ranks = 1;
  std::stringstream ss(text);
  std::string item;
  bool tokens = false;
  while (std::getline(ss, item, ',')) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos) {
      *why = "'" + item + "' is not key=value";
      return false;
    }
    const std::string k = item.substr(0, eq), v = item.substr(eq + 1);
    char* end = nullptr;
    auto num = [&](double* out) {
      *out = std::strtod(v.c_str(), &end);
      return !v.empty() && *end == '\0';
    };
    double x = 0;
    std::string err;
    if (k == "tokens" && num(&x) && x >= 1) sp.tokensPerRank = static_cast<int64_t>(x), tokens = true;
    else if (k == "topk" && num(&x) && x >= 1) sp.topk = static_cast<int>(x);
    else if (k == "experts" && num(&x) && x >= 1) sp.experts = static_cast<int>(x);
    else if (k == "cf" && num(&x) && x >= 0) sp.capacityFactor = x;
    else if (k == "seed" && num(&x) && x >= 0) sp.seed = static_cast<uint64_t>(x);
    else if (k == "routing" && (v == "sample" || v == "expected"))
      sp.sampling = v == "sample" ? moe::Sampling::Random : moe::Sampling::Expected;
    else if (k == "dist") {
      if (moe::parseDistribution(v, &sp.dist, &err) != Status::Success) return *why = err, false;
    } else if (k == "placement") {
      if (moe::parsePlacement(v, &sp.placement, &sp.expertRank, &err) != Status::Success)
        return *why = err, false;
    } else {
      *why = "bad '" + item + "' (keys: tokens, topk, experts, dist, placement, cf, routing, seed)";
      return false;
    }
  }
  if (!tokens) {
    *why = "needs tokens=N";
    return false;
  }
  s.spec = sp;
  s.text = text;
  s.active = true;
  return true;
}

bool moeActive() { return state().active; }

std::string moeDescription(int n) {
  const Pattern& p = patternFor(n);
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "MoE counts (--moe %s): %llu token copies, largest send %llu / receive %llu "
                "tokens, %lld dropped choices; elements per token = size / (tokens per rank)",
                state().text.c_str(), static_cast<unsigned long long>(p.totalTokens),
                static_cast<unsigned long long>(p.maxRow), static_cast<unsigned long long>(p.maxCol),
                static_cast<long long>(p.routing.droppedAssignments));
  return buf;
}

size_t moeCount(int from, int to, size_t per, int n) {
  const Pattern& p = patternFor(n);
  return p.routing.tokens[static_cast<size_t>(from) * n + to] * perToken(p, per, n);
}
size_t moeMaxSend(size_t per, int n) {
  const Pattern& p = patternFor(n);
  return p.maxRow * perToken(p, per, n);
}
size_t moeMaxRecv(size_t per, int n) {
  const Pattern& p = patternFor(n);
  return p.maxCol * perToken(p, per, n);
}

size_t moeBufferBytes(size_t maxBytes, int n) {
  size_t need = 0;
  for (size_t ts : {1, 2, 4, 8}) {
    const size_t per = maxBytes / ts / static_cast<size_t>(n);
    need = std::max(need, std::max(moeMaxSend(per, n), moeMaxRecv(per, n)) * ts);
  }
  return need;
}

}  // namespace nlccl::perf
