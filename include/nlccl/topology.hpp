// Public C++ API of the fabric model (DESIGN.md section 6): chips with a collective engine,
// switches, directed links and routes, loaded from a preset name or a JSON topology file.
// The JSON format and the source of every preset figure are documented in docs/fabric.md.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "nlccl/export.hpp"
#include "nlccl/status.hpp"

namespace nlccl::fabric {

constexpr double kInfinite = std::numeric_limits<double>::infinity();

/// A chip's collective engine: DMA engines move data out of the chip, reductions on arrival
/// (read-add-write into HBM) are limited by HBM bandwidth. Any figure may be infinite (no limit).
struct ChipEngine {
  std::string name;
  double dmaEngines = kInfinite;   ///< number of DMA engines
  double dmaEngineBps = kInfinite; ///< bytes/s per DMA engine
  double hbmBps = kInfinite;       ///< HBM bandwidth, bytes/s
  /// HBM bytes moved per byte reduced on arrival: read of the destination + write of the sum = 2
  /// (the incoming operand comes off the link, not out of local HBM).
  double hbmBytesPerReducedByte = 2.0;
  double localLatencyS = 0.0;      ///< start-up of a transfer between two ranks of one chip
  /// Sends and reductions on arrival draw on one engine (a host rank, whose one thread both
  /// copies what it sends and reduces what it receives): flow mode shares one resource per chip
  /// between them, of dmaBps() send bytes per second, a reduced byte costing
  /// sharedReduceCost() of them. Needs finite DMA and HBM figures; analytical mode is unchanged.
  bool sharedEngine = false;
  /// A transfer's bytes are moved by the receiving chip's engine, not the sender's (a host rank
  /// that copies straight out of its peer's buffer over shared memory: a sender with two
  /// receivers is read by both at once). Flow mode and the tuner's bound then charge the
  /// receiver's DMA figure. Ignored with sharedEngine.
  bool receiverCopies = false;
  /// Send bytes one reduced byte costs on a shared engine: its HBM bytes at the HBM rate, over
  /// the DMA rate.
  double sharedReduceCost() const { return hbmBytesPerReducedByte * dmaBps() / hbmBps; }
  bool sharesEngine() const {
    return sharedEngine && dmaBps() < kInfinite && hbmBps < kInfinite && hbmBps > 0;
  }
  /// The chip whose DMA a transfer from `src` to `dst` draws on when the engine is not shared:
  /// the receiver's with receiverCopies, else the sender's.
  bool receiverMoves() const { return receiverCopies && !sharesEngine(); }
  int mover(int src, int dst) const { return receiverMoves() ? dst : src; }
  /// Outgoing data rate of the chip: engines x per-engine rate (infinite if either is).
  double dmaBps() const { return dmaEngines * dmaEngineBps; }
  /// Seconds a local copy (HBM read + write) or reduce (two reads, one write) of `bytes` takes:
  /// its HBM traffic at the HBM rate, or the bytes at the DMA rate, whichever binds. The one cost
  /// of a local op: the simulator and the neuronlink transport both charge it.
  double localOpSeconds(double bytes, bool reduce) const {
    const double hbm = (reduce ? 3.0 : 2.0) * bytes / hbmBps;
    const double dma = bytes / dmaBps();
    const double t = hbm > dma ? hbm : dma;
    return t < kInfinite ? t : 0.0;
  }
};

enum class LevelKind : uint8_t {
  Switch,  ///< one switch per unit; chips (attach=chip) or lower switches (attach=below) plug in
  Direct,  ///< full mesh between the chips at the same position of the `size` units below
  Torus,   ///< torus (dims) between the chips at the same position of the units below
};

/// One layer of the fabric. A unit of level L is `size` units of level L-1 (level 0 units are
/// chips). Bandwidths are per direction.
struct Level {
  std::string name;
  LevelKind kind = LevelKind::Switch;
  int size = 1;
  bool attachChip = true;  ///< Switch only: every chip has its own port (else lower switches do)
  std::vector<int> dims;   ///< Torus only; product == size
  /// Switch: bytes/s per chip into this level (an attach=below uplink carries this times the chips
  /// under it). Direct/Torus: bytes/s of each link.
  double bwBps = kInfinite;
  /// Switch: latency added by a route through this switch (half on the way up, half down).
  /// Direct/Torus: latency of one hop.
  double latencyS = 0;
  /// Switch, attach=chip: NeuronLink ports per chip into this level (Trainium3: four), each
  /// carrying bwBps / ports. With `stripe` (the default) a transfer is spread over all of them by
  /// the chip's DMA engines; otherwise each transfer uses one port, at most bwBps / ports.
  int ports = 1;
  bool stripe = true;
};

/// A directed link between two nodes (chips are nodes [0, numChips), switches follow).
struct Link {
  int from = -1;
  int to = -1;
  double bwBps = kInfinite;
  double latencyS = 0;
  int level = -1;  ///< index into levels()
  /// The chip's ports this link stands for (Level::ports): bwBps is their sum.
  int ports = 1;
};

/// The path between two chips.
struct Route {
  std::vector<int> links;       ///< link ids in order
  double latencyS = 0;          ///< sum of link latencies
  /// min link bandwidth, and a port's where a level's ports are not striped (kInfinite for an
  /// empty route)
  double bottleneckBps = kInfinite;
  int topLevel = -1;            ///< highest level the route uses (-1: same chip)
};

/// A fabric: chips, levels, links, ranks-to-chips, simulation defaults. Immutable once loaded.
class NLCCL_MODEL_API Topology {
 public:
  /// Loads `spec`: a preset name (trn3-us144, trn3-us144-pcie, trn3-us64, trn2-us64, nvl72),
  /// `flat:<p>`, `cluster:<preset>x<N>`, or a path to a JSON file. Each override is
  /// `key=value` where key is a dotted path into the JSON document (`chip.hbm_GBps`,
  /// `levels.server.bw_GBps`, `levels.0.latency_us`, `ranks_per_chip`) and value is JSON
  /// (a bare word is taken as a string). On error returns InvalidArgument and sets *error.
  static Status load(const std::string& spec, const std::vector<std::string>& overrides,
                     Topology* out, std::string* error);
  /// Parses a JSON document in the topology format (docs/fabric.md).
  static Status fromJsonText(const std::string& text, const std::vector<std::string>& overrides,
                             Topology* out, std::string* error);
  /// The JSON document a spec resolves to (after overrides), for `--dump-topology`.
  static Status resolveJsonText(const std::string& spec, const std::vector<std::string>& overrides,
                                std::string* json, std::string* error);
  /// Names of the compiled-in presets.
  static std::vector<std::string> presetNames();

  const std::string& name() const { return name_; }
  int numChips() const { return numChips_; }
  int numNodes() const { return numNodes_; }
  int ranksPerChip() const { return ranksPerChip_; }
  /// Ranks the fabric holds: numChips x ranksPerChip (or the rank_to_chip list's length).
  int numRanks() const;
  /// Chip of `rank` (rank / ranksPerChip unless the file gives a rank_to_chip list).
  int chipOfRank(int rank) const;
  const ChipEngine& chip() const { return chip_; }
  const std::vector<Level>& levels() const { return levels_; }
  const std::vector<Link>& links() const { return links_; }
  /// "chip12", "server3", "rack1", ...
  std::string nodeName(int node) const;
  std::string linkName(int link) const;
  /// Chips per unit of level L (span(-1) == 1).
  int64_t span(int level) const;

  /// The route between two chips (up and down through switch layers, dimension order on tori,
  /// partner links between units). Empty when a == b.
  Route route(int chipA, int chipB) const;
  /// Appends the link ids of the route to `links` (no allocation beyond the vector's growth).
  void routeLinks(int chipA, int chipB, std::vector<int>* links) const;
  /// The most one transfer may move per second along `route` (link ids): a port's bandwidth
  /// where a level's ports are not striped (Level::stripe), else unlimited (kInfinite).
  double transferCapBps(const std::vector<int>& route) const;

  /// Group sizes (innermost first, product == nranks) for hierarchical algorithms: ranks per chip,
  /// then each level; empty-sized levels are skipped; the outermost group is truncated to fit.
  std::vector<int> levelGroups(int nranks) const;

  /// Defaults the simulator takes from the topology file.
  double launchOverheadS() const { return launchOverheadS_; }
  /// Bytes a sender may have in flight to one receiver ahead of the receives it posted (the
  /// transport's buffer per pair and channel); infinity when the file does not say (eager).
  double pairWindowBytes() const { return pairWindowBytes_; }
  size_t chunkBytes() const { return chunkBytes_; }
  /// True for `flat:<p>` (no slicing by default, no engine limits).
  bool isFlat() const { return flat_; }

 private:
  friend class TopologyBuilder;
  std::string name_;
  ChipEngine chip_;
  std::vector<Level> levels_;
  std::vector<Link> links_;
  std::vector<int> rankToChip_;
  int numChips_ = 0;
  int numNodes_ = 0;
  int ranksPerChip_ = 1;
  double launchOverheadS_ = 0;
  double pairWindowBytes_ = kInfinite;
  size_t chunkBytes_ = 0;
  bool flat_ = false;
  // Lookup tables (see topology.cpp): per level, first link id of each port family.
  std::vector<int64_t> span_;            // span_[L+1] = chips per unit of level L
  std::vector<int> switchBase_;          // per level: node id of unit 0's switch (or -1)
  std::vector<int> upBase_;              // per level: link id of port 0's up link (down = up + 1)
  std::vector<int> meshBase_;            // per level: Direct/Torus base index into meshLinks_
  std::vector<int> portsPerChip_;        // per level: links per chip (Direct/Torus)
  std::vector<int> meshLinks_;           // [meshBase_ + chip * ports + port] -> link id
};

}  // namespace nlccl::fabric
