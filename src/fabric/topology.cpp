// Builds a Topology from its JSON document: nodes, links and the lookup tables routes use.
#include <cmath>
#include <numeric>

#include "fabric/json_spec.hpp"
#include "fabric/presets.hpp"
#include "nlccl/topology.hpp"
#include "util/log.hpp"

namespace nlccl::fabric {

using nlohmann::json;

namespace {

Status fail(std::string* error, std::string msg) {
  if (error) *error = std::move(msg);
  return Status::InvalidArgument;
}

// A figure: a number, or "inf" / null for no limit.
bool readFigure(const json& obj, const char* key, double scale, double* out, std::string* error) {
  if (!obj.contains(key)) return true;
  const json& v = obj.at(key);
  if (v.is_null() || (v.is_string() && (v == "inf" || v == "infinity"))) {
    *out = kInfinite;
    return true;
  }
  if (!v.is_number() || v.get<double>() < 0) {
    if (error) *error = std::string("'") + key + "' must be a non-negative number or \"inf\"";
    return false;
  }
  *out = v.get<double>() * scale;
  return true;
}

}  // namespace

class TopologyBuilder {
 public:
  static Status build(const json& doc, Topology* t, std::string* error);
};

Status TopologyBuilder::build(const json& doc, Topology* t, std::string* error) {
  if (!doc.is_object()) return fail(error, "topology document must be a JSON object");
  *t = Topology();
  t->name_ = doc.value("name", "custom");
  t->flat_ = doc.value("flat", false);
  t->ranksPerChip_ = doc.value("ranks_per_chip", 1);
  if (t->ranksPerChip_ < 1) return fail(error, "ranks_per_chip must be >= 1");
  double launchUs = 0;
  if (!readFigure(doc, "launch_overhead_us", 1.0, &launchUs, error)) return Status::InvalidArgument;
  t->launchOverheadS_ = launchUs * 1e-6;
  if (!readFigure(doc, "pair_window_bytes", 1.0, &t->pairWindowBytes_, error))
    return Status::InvalidArgument;
  const json chunk = doc.value("chunk_bytes", json(0));
  if (!chunk.is_number_unsigned() && !chunk.is_number_integer())
    return fail(error, "chunk_bytes must be an integer");
  t->chunkBytes_ = chunk.get<size_t>();

  const json chip = doc.value("chip", json::object());
  ChipEngine& c = t->chip_;
  c.name = chip.value("name", "chip");
  double localUs = 0;
  if (!readFigure(chip, "dma_engines", 1.0, &c.dmaEngines, error) ||
      !readFigure(chip, "dma_engine_GBps", 1e9, &c.dmaEngineBps, error) ||
      !readFigure(chip, "hbm_GBps", 1e9, &c.hbmBps, error) ||
      !readFigure(chip, "hbm_bytes_per_reduced_byte", 1.0, &c.hbmBytesPerReducedByte, error) ||
      !readFigure(chip, "local_latency_us", 1.0, &localUs, error))
    return Status::InvalidArgument;
  c.localLatencyS = localUs * 1e-6;
  const json shared = chip.value("shared_engine", json(false));
  if (!shared.is_boolean()) return fail(error, "chip.shared_engine must be true or false");
  c.sharedEngine = shared.get<bool>();
  const json pulled = chip.value("receiver_copies", json(false));
  if (!pulled.is_boolean()) return fail(error, "chip.receiver_copies must be true or false");
  c.receiverCopies = pulled.get<bool>();

  if (!doc.contains("levels") || !doc["levels"].is_array() || doc["levels"].empty())
    return fail(error, "topology needs a non-empty 'levels' array");
  int64_t chips = 1;
  for (const json& lj : doc["levels"]) {
    Level l;
    l.name = lj.value("name", "level" + std::to_string(t->levels_.size()));
    const std::string kind = lj.value("kind", "switch");
    if (kind == "switch") l.kind = LevelKind::Switch;
    else if (kind == "direct") l.kind = LevelKind::Direct;
    else if (kind == "torus") l.kind = LevelKind::Torus;
    else return fail(error, "level " + l.name + ": unknown kind '" + kind + "'");
    l.size = lj.value("size", 0);
    if (l.size < 1) return fail(error, "level " + l.name + ": size must be >= 1");
    l.attachChip = lj.value("attach", "chip") != "below" || t->levels_.empty();
    if (l.kind == LevelKind::Switch && !l.attachChip &&
        t->levels_.back().kind != LevelKind::Switch)
      return fail(error, "level " + l.name + ": attach=below needs a switch level below");
    if (l.kind == LevelKind::Torus) {
      l.dims = lj.value("dims", std::vector<int>{l.size});
      int prod = 1;
      for (int d : l.dims) prod *= d;
      if (prod != l.size || l.dims.empty())
        return fail(error, "level " + l.name + ": product of dims must equal size");
    }
    l.ports = lj.value("ports", 1);
    l.stripe = lj.value("stripe", true);
    if (l.ports < 1) return fail(error, "level " + l.name + ": ports must be >= 1");
    if (l.ports > 1 && !(l.kind == LevelKind::Switch && l.attachChip))
      return fail(error, "level " + l.name + ": ports apply to a switch level chips attach to");
    double us = 0;
    if (!readFigure(lj, "bw_GBps", 1e9, &l.bwBps, error) ||
        !readFigure(lj, "latency_us", 1.0, &us, error))
      return Status::InvalidArgument;
    if (!(l.bwBps > 0)) return fail(error, "level " + l.name + ": bw_GBps must be > 0");
    l.latencyS = us * 1e-6;
    chips *= l.size;
    if (chips > (1 << 24)) return fail(error, "topology too large (more than 2^24 chips)");
    t->levels_.push_back(std::move(l));
  }
  t->numChips_ = static_cast<int>(chips);
  if (doc.contains("rank_to_chip")) {
    t->rankToChip_ = doc["rank_to_chip"].get<std::vector<int>>();
    for (int ch : t->rankToChip_)
      if (ch < 0 || ch >= t->numChips_) return fail(error, "rank_to_chip names a chip out of range");
  }

  // Nodes and links. Chips are nodes [0, chips); each switch level adds one node per unit.
  const int nl = static_cast<int>(t->levels_.size());
  t->span_.assign(nl + 1, 1);
  for (int L = 0; L < nl; ++L) t->span_[L + 1] = t->span_[L] * t->levels_[L].size;
  t->switchBase_.assign(nl, -1);
  t->upBase_.assign(nl, -1);
  t->meshBase_.assign(nl, -1);
  t->portsPerChip_.assign(nl, 0);
  int node = t->numChips_;
  auto addLink = [&](int from, int to, double bw, double lat, int level) {
    t->links_.push_back(Link{from, to, bw, lat, level, t->levels_[level].ports});
  };
  for (int L = 0; L < nl; ++L) {
    const Level& l = t->levels_[L];
    const int units = static_cast<int>(chips / t->span_[L + 1]);
    if (l.kind == LevelKind::Switch) {
      t->switchBase_[L] = node;
      node += units;
      t->upBase_[L] = static_cast<int>(t->links_.size());
      if (l.attachChip) {
        for (int ch = 0; ch < t->numChips_; ++ch) {
          const int sw = t->switchBase_[L] + static_cast<int>(ch / t->span_[L + 1]);
          addLink(ch, sw, l.bwBps, l.latencyS / 2, L);
          addLink(sw, ch, l.bwBps, l.latencyS / 2, L);
        }
      } else {
        // One uplink per unit of the level below, carrying bw x the chips under it.
        const int below = static_cast<int>(chips / t->span_[L]);
        const double bw = l.bwBps * static_cast<double>(t->span_[L]);
        for (int u = 0; u < below; ++u) {
          const int lower = t->switchBase_[L - 1] + u;
          const int sw = t->switchBase_[L] + u / l.size;
          addLink(lower, sw, bw, l.latencyS / 2, L);
          addLink(sw, lower, bw, l.latencyS / 2, L);
        }
      }
    } else {
      // Direct: size-1 links per chip; Torus: 2 per dimension (+, -). A dimension of 2 has one
      // neighbour, so both directions name the same link.
      const int ports = l.kind == LevelKind::Direct ? l.size - 1
                                                    : 2 * static_cast<int>(l.dims.size());
      t->portsPerChip_[L] = ports;
      t->meshBase_[L] = static_cast<int>(t->meshLinks_.size());
      t->meshLinks_.resize(t->meshLinks_.size() + static_cast<size_t>(ports) * t->numChips_, -1);
      const int64_t sub = t->span_[L];
      for (int ch = 0; ch < t->numChips_; ++ch) {
        const int64_t base = ch - (ch / sub % l.size) * sub;  // same offset, unit index 0
        const int idx = static_cast<int>(ch / sub % l.size);
        int* slot = &t->meshLinks_[t->meshBase_[L] + static_cast<size_t>(ch) * ports];
        if (l.kind == LevelKind::Direct) {
          for (int j = 0; j < l.size; ++j) {
            if (j == idx) continue;
            slot[j < idx ? j : j - 1] = static_cast<int>(t->links_.size());
            addLink(ch, static_cast<int>(base + j * sub), l.bwBps, l.latencyS, L);
          }
        } else {
          int stride = 1;
          for (size_t d = 0; d < l.dims.size(); ++d) {
            const int dim = l.dims[d];
            const int coord = idx / stride % dim;
            for (int dir = 0; dir < 2 && dim > 1; ++dir) {
              if (dir == 1 && dim == 2) {
                slot[2 * d + 1] = slot[2 * d];
                continue;
              }
              const int nc = (coord + (dir == 0 ? 1 : dim - 1)) % dim;
              const int nidx = idx + (nc - coord) * stride;
              slot[2 * d + dir] = static_cast<int>(t->links_.size());
              addLink(ch, static_cast<int>(base + nidx * sub), l.bwBps, l.latencyS, L);
            }
            stride *= dim;
          }
        }
      }
    }
  }
  t->numNodes_ = node;
  return Status::Success;
}

Status Topology::fromJsonText(const std::string& text, const std::vector<std::string>& overrides,
                              Topology* out, std::string* error) {
  json doc = json::parse(text, nullptr, false, true);
  if (doc.is_discarded()) return fail(error, "topology is not valid JSON");
  for (const std::string& o : overrides) NLCHECK(applyOverride(o, &doc, error));
  return TopologyBuilder::build(doc, out, error);
}

Status Topology::load(const std::string& spec, const std::vector<std::string>& overrides,
                      Topology* out, std::string* error) {
  json doc;
  NLCHECK(resolveSpec(spec, overrides, &doc, error));
  return TopologyBuilder::build(doc, out, error);
}

Status Topology::resolveJsonText(const std::string& spec, const std::vector<std::string>& overrides,
                                 std::string* text, std::string* error) {
  json doc;
  NLCHECK(resolveSpec(spec, overrides, &doc, error));
  *text = doc.dump(2);
  return Status::Success;
}

std::vector<std::string> Topology::presetNames() {
  std::vector<std::string> names;
  for (const Preset& p : presets()) names.emplace_back(p.name);
  return names;
}

int Topology::numRanks() const {
  return rankToChip_.empty() ? numChips_ * ranksPerChip_ : static_cast<int>(rankToChip_.size());
}

int Topology::chipOfRank(int rank) const {
  return rankToChip_.empty() ? rank / ranksPerChip_ : rankToChip_.at(static_cast<size_t>(rank));
}

int64_t Topology::span(int level) const { return span_.at(static_cast<size_t>(level + 1)); }

std::string Topology::nodeName(int node) const {
  if (node < numChips_) return "chip" + std::to_string(node);
  for (int L = static_cast<int>(levels_.size()) - 1; L >= 0; --L)
    if (switchBase_[L] >= 0 && node >= switchBase_[L])
      return levels_[L].name + std::to_string(node - switchBase_[L]);
  return "node" + std::to_string(node);
}

std::string Topology::linkName(int link) const {
  const Link& l = links_.at(static_cast<size_t>(link));
  return nodeName(l.from) + "->" + nodeName(l.to);
}

std::vector<int> Topology::levelGroups(int nranks) const {
  std::vector<int> sizes;
  if (ranksPerChip_ > 1 && rankToChip_.empty()) sizes.push_back(ranksPerChip_);
  for (const Level& l : levels_) sizes.push_back(l.size);
  std::vector<int> groups;
  int64_t prod = 1;
  for (int s : sizes) {
    if (s <= 1) continue;
    if (prod * s <= nranks && nranks % (prod * s) == 0) {
      groups.push_back(s);
      prod *= s;
    } else {
      break;
    }
  }
  if (prod < nranks) {
    if (nranks % prod == 0) {
      groups.push_back(static_cast<int>(nranks / prod));
    } else {
      groups.assign(1, nranks);
    }
  }
  if (groups.empty()) groups.push_back(nranks);
  return groups;
}

}  // namespace nlccl::fabric
