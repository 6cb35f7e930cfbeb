#include "report.hpp"
#include "moe_pattern.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>

extern char** environ;

namespace nlccl::perf {

namespace {

/// The nccl-tests release whose flags, table and JSON (version 2) nlccl-perf follows.
constexpr const char* kNcclTestsVersion = "2.19.0";
constexpr int kJsonVersion = 2;

/// nccl-tests' getFloatStr: as many decimals as fit in `width` columns.
std::string floatStr(double value, int width) {
  char s[64];
  int power = 0;
  for (uint64_t v = 1; value >= static_cast<double>(v) && power < 20; v *= 10) power++;
  if (power < width - 2) std::snprintf(s, sizeof s, "%*.2f", width, value);
  else if (power < width - 1) std::snprintf(s, sizeof s, "%*.1f", width, value);
  else if (power < width + 1) std::snprintf(s, sizeof s, "%*.0f", width, value);
  else std::snprintf(s, sizeof s, "%*.1e", width, value);
  return s;
}

/// The MPI call --compare-mpi times for a collective.
const char* mpiName(Coll c) {
  switch (c) {
    case Coll::AllReduce: return "MPI_Allreduce";
    case Coll::AllGather: return "MPI_Allgather";
    case Coll::ReduceScatter: return "MPI_Reduce_scatter_block";
    case Coll::Broadcast: return "MPI_Bcast";
    case Coll::Reduce: return "MPI_Reduce";
    case Coll::AlltoAll: return "MPI_Alltoall";
    case Coll::SendRecv: return "MPI_Sendrecv";
    case Coll::AlltoAllv: return "MPI_Alltoallv";
    case Coll::Gather: return "MPI_Gather";
    case Coll::Scatter: return "MPI_Scatter";
    case Coll::HyperCube: return "MPI_Allgather";
  }
  return "MPI";
}

/// nccl-tests writes booleans as the strings "true" and "false".
const char* boolStr(bool b) { return b ? "true" : "false"; }

/// Opens `path` for writing without replacing a file: if it exists, path.0, path.1, ... as
/// nccl-tests' -J does. Returns the name used, or "" (with errno) if none could be made.
std::string createFresh(const std::string& path) {
  for (int i = -1; i < 1000; ++i) {
    std::string p = i < 0 ? path : path + "." + std::to_string(i);
    int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd >= 0) {
      ::close(fd);
      return p;
    }
    if (errno != EEXIST) return "";
  }
  return "";
}

}  // namespace

std::string formatNow() {
  char buf[64];
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

Reporter::Reporter(const Options& opts, int nranks, const char* mode, bool modelled)
    : opts_(opts), nranks_(nranks), mode_(mode), modelled_(modelled) {}

Reporter::~Reporter() {
  if (csv_ != nullptr) std::fclose(csv_);
}

bool Reporter::open() {
  if (!opts_.csvPath.empty()) {
    csv_ = std::fopen(opts_.csvPath.c_str(), "w");
    if (csv_ == nullptr) {
      std::fprintf(stderr, "nlccl-perf: --csv: cannot write '%s'\n", opts_.csvPath.c_str());
      return false;
    }
    std::fprintf(csv_,
                 "collective,algorithm,ranks,bytes,count,type,redop,root,in_place,time_us,"
                 "algbw_GBps,busbw_GBps,wrong%s\n",
                 opts_.compareMpi ? ",mpi_time_us,mpi_busbw_GBps,mpi_ratio" : "");
  }
  if (!opts_.jsonPath.empty()) {
    jsonPath_ = createFresh(opts_.jsonPath);
    if (jsonPath_.empty()) {
      std::fprintf(stderr, "nlccl-perf: -J: cannot write '%s': %s\n", opts_.jsonPath.c_str(),
                   std::strerror(errno));
      return false;
    }
    std::printf("# Writing JSON output to %s\n", jsonPath_.c_str());
    int library = 0;
    nlcclGetVersion(&library);
    // The environment that shapes a run: nlccl's and NCCL's variables and the launcher's rank
    // layout (nccl-tests lists all of it; the rest may hold anything, so it stays out).
    nlohmann::ordered_json env = nlohmann::ordered_json::array();
    for (char** e = environ; e && *e; ++e)
      for (const char* prefix : {"NLCCL_", "NCCL_", "OMPI_COMM_WORLD_", "PMI_", "PMIX_RANK"})
        if (std::strncmp(*e, prefix, std::strlen(prefix)) == 0) {
          env.push_back(*e);
          break;
        }
    json_ = {{"version", kJsonVersion},
             {"start_time", formatNow()},
             {"args", opts_.args},
             {"env", env},
             {"nccl_version", library}};
  }
  return true;
}

void Reporter::header(const std::vector<RankInfo>& ranks) {
  int library = 0;
  nlcclGetVersion(&library);
  // nccl-tests' first line, with the NCCL API level nlccl implements, then nlccl's own.
  std::printf("# nccl-tests version %s nccl-headers=%d nccl-library=%d\n", kNcclTestsVersion,
              NLCCL_VERSION_CODE, library);
  std::printf("# nlccl-perf: nlccl %d.%d.%d, launch=%s, %d ranks (%d per process)\n",
              NLCCL_RELEASE_MAJOR, NLCCL_RELEASE_MINOR, NLCCL_RELEASE_PATCH, mode_.c_str(),
              nranks_, opts_.ranksPerProcess());
  std::printf("# Collective test starting: %s\n", opts_.program.c_str());
  std::printf(
      "# nThread %d nGpus %d minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: %d "
      "agg iters: %d validation: %d graph: %d unalign: %zu\n",
      opts_.threads, opts_.gpus, opts_.minBytes, opts_.maxBytes,
      opts_.stepFactor > 1 ? opts_.stepFactor : opts_.stepBytes,
      opts_.stepFactor > 1 ? "factor" : "bytes", opts_.warmup, opts_.iters, opts_.aggIters,
      opts_.check, opts_.graphs, opts_.unalign);
  if (opts_.blocking == 1)
    std::printf("# Blocking Enabled: wait for completion and barrier after each collective \n");
  if (opts_.blocking > 1)
    std::printf("# Blocking Enabled: wait for completion after each collective (no barrier) \n");
  if (opts_.nullStream)
    std::printf("# NULL Stream: every call blocks until it is done, as MPI's do \n");
  if (shmLatencyNs_ >= 0)
    std::printf("# Shared-memory latency, ranks 0 <-> 1: %.0f ns one way (a cache line between "
                "their cores)\n", shmLatencyNs_);
  if (opts_.perIter)
    std::printf("# Per-Iteration Report: host timing of each iteration; i_* uses max over "
                "process rows \n");
  if (opts_.parallelInit)
    std::printf("# Parallel Init Enabled: threads call into NlcclInitRank concurrently \n");
  if (opts_.timeoutSec > 0) std::printf("# Timeout: %d s per test\n", opts_.timeoutSec);
  if (moeActive()) std::printf("# %s\n", moeDescription(nranks_).c_str());
  std::printf("#\n");
  if (!jsonPath_.empty()) {
    nlohmann::ordered_json cfg = {{"nthreads", opts_.threads},
                                  {"ngpus", opts_.gpus},
                                  {"minimum_bytes", opts_.minBytes},
                                  {"maximum_bytes", opts_.maxBytes}};
    if (opts_.stepFactor > 1) cfg["step_factor"] = opts_.stepFactor;
    else cfg["step_bytes"] = opts_.stepBytes;
    cfg["warmup_iters"] = opts_.warmup;
    cfg["iterations"] = opts_.iters;
    cfg["aggregated_iterations"] = opts_.aggIters;
    cfg["validation"] = opts_.check;
    cfg["graph"] = opts_.graphs;
    cfg["blocking_collectives"] = boolStr(opts_.blocking != 0);
    cfg["per_iter_timing"] = boolStr(opts_.perIter != 0);
    cfg["parallel_init"] = boolStr(opts_.parallelInit != 0);
    if (shmLatencyNs_ >= 0) cfg["shm_latency_ns"] = shmLatencyNs_;
    json_["config"] = cfg;
  }
  std::printf("# Using devices\n");
  nlohmann::ordered_json devices = nlohmann::ordered_json::array();
  for (const RankInfo& r : ranks) {
    std::printf("#  Rank %2d Group %2d Pid %6d on %10.52s device %2d [host] nlccl CPU rank, "
                "peers over %.64s\n",
                r.rank, 0, r.pid, r.host, r.device, r.peers);
    devices.push_back({{"rank", r.rank},
                       {"group", 0},
                       {"pid", r.pid},
                       {"hostname", std::string(r.host, strnlen(r.host, sizeof r.host))},
                       {"device", r.device},
                       {"device_hex", "host"},
                       {"device_info", "nlccl CPU rank"},
                       {"peer_transports", std::string(r.peers, strnlen(r.peers, sizeof r.peers))}});
  }
  if (!jsonPath_.empty()) json_["config"]["devices"] = devices;
  // The column layout of nccl-tests 2.19; the per-iteration, MPI, modelled and timestamp columns
  // are appended, so the first thirteen stay where scripts expect them.
  const bool mpi = opts_.compareMpi, per = opts_.perIter != 0;
  const char* t = opts_.cpuTime ? "cputime" : "time";
  std::printf("#\n# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place",
              "", "", "", "", "");
  if (per) std::printf("            (+ per-iteration: out-of-place, in-place)");
  if (mpi) std::printf("  %16s", mpiName(opts_.coll));
  if (modelled_) std::printf("     modelled (neuronlink): out-of-place   in-place");
  std::printf("\n# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s", "size",
              "count", "type", "redop", "root", t, "algbw", "busbw", "#wrong", t, "algbw", "busbw",
              "#wrong");
  if (per)
    for (int h = 0; h < 2; ++h) std::printf("  %7s  %7s  %7s  %7s", "i_min", "i_max", "i_p99", "i_cv%");
  if (mpi) std::printf("  %8s  %6s", "mpi time", "ratio");
  if (modelled_) std::printf("  %8s  %6s  %8s  %6s", "mtime", "mbusbw", "mtime", "mbusbw");
  if (opts_.timestamps) std::printf("  %19s", "timestamp");
  std::printf("\n# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s", "(B)",
              "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)",
              "");
  if (per)
    for (int h = 0; h < 2; ++h) std::printf("  %7s  %7s  %7s  %7s", "(us)", "(us)", "(us)", "(%)");
  if (mpi) std::printf("  %8s  %6s", "(us)", "nl/mpi");
  if (modelled_) std::printf("  %8s  %6s  %8s  %6s", "(us)", "(GB/s)", "(us)", "(GB/s)");
  if (opts_.timestamps) std::printf("  %19s", "%Y-%m-%d %H:%M:%S");
  std::printf("\n");
  std::fflush(stdout);
  if (!jsonPath_.empty()) json_["results"] = nlohmann::ordered_json::array();
}

nlohmann::ordered_json Reporter::half(const Measure& m) const {
  return {{opts_.cpuTime ? "cpu_time" : "time", m.timeUs},
          {"alg_bw", m.algBw},
          {"bus_bw", m.busBw},
          {"nwrong", m.wrong >= 0 ? nlohmann::ordered_json(static_cast<double>(m.wrong))
                                  : nlohmann::ordered_json()}};
}

nlohmann::ordered_json Reporter::perIterJson(const Measure& m) const {
  const IterStats& s = m.stats;
  nlohmann::ordered_json j = {{"min_us", s.min},     {"max_us", s.max},     {"avg_us", s.avg},
                              {"p50_us", s.p50},     {"p95_us", s.p95},     {"p99_us", s.p99},
                              {"stdev_us", s.stdev}, {"cv_pct", s.cvPct},   {"times_us", m.timesUs}};
  if (m.processTimesUs.size() > 1) j["per_process_max_times_us"] = m.processTimesUs;
  return j;
}

void Reporter::row(size_t bytes, size_t count, nlcclDataType_t type, const char* op, int root,
                   const Measure& oop, const Measure& ip) {
  std::printf("%12zu  %12zu  %8s  %6s  %6d", bytes, count, typeName(type), op, root);
  for (const Measure* m : {&oop, &ip}) {
    if (m->wrong >= 0) {
      std::printf("  %7s  %6s  %6s  %6g", floatStr(m->timeUs, 7).c_str(),
                  floatStr(m->algBw, 6).c_str(), floatStr(m->busBw, 6).c_str(),
                  static_cast<double>(m->wrong));
    } else {
      std::printf("  %7s  %6s  %6s    N/A", floatStr(m->timeUs, 7).c_str(),
                  floatStr(m->algBw, 6).c_str(), floatStr(m->busBw, 6).c_str());
    }
    bwSum_ += m->busBw;
    ++bwCount_;
    if (m->wrong > 0) ++errors_;
  }
  if (opts_.perIter)
    for (const Measure* m : {&oop, &ip})
      std::printf("  %7s  %7s  %7s  %7s", floatStr(m->stats.min, 7).c_str(),
                  floatStr(m->stats.max, 7).c_str(), floatStr(m->stats.p99, 7).c_str(),
                  floatStr(m->stats.cvPct, 7).c_str());
  if (opts_.compareMpi) {
    // Out of place only; N/A where MPI has no equivalent (e.g. a bfloat16 reduction).
    if (oop.mpiTimeUs > 0) {
      double ratio = oop.timeUs / oop.mpiTimeUs;
      std::printf("  %8s  %6s", floatStr(oop.mpiTimeUs, 8).c_str(), floatStr(ratio, 6).c_str());
      if (ratio > 0) {
        logRatioSum_ += std::log(ratio);
        ++ratioCount_;
      }
    } else {
      std::printf("  %8s  %6s", "N/A", "N/A");
    }
  }
  if (modelled_)
    for (const Measure* m : {&oop, &ip})
      std::printf("  %8s  %6s", floatStr(m->modelUs, 8).c_str(), floatStr(m->modelBusBw, 6).c_str());
  if (opts_.timestamps) std::printf("  %19s", formatNow().c_str());
  std::printf("\n");
  std::fflush(stdout);
  csvRecord(bytes, count, type, op, root, false, oop);
  csvRecord(bytes, count, type, op, root, true, ip);
  if (jsonPath_.empty()) return;
  char rootStr[16];
  std::snprintf(rootStr, sizeof rootStr, "%6i", root);  // nccl-tests writes the root as text
  nlohmann::ordered_json r = {{"size", bytes}, {"count", count}, {"type", typeName(type)},
                              {"redop", op},   {"root", rootStr}};
  r["out_of_place"] = half(oop);
  if (opts_.perIter) r["out_of_place_per_iter"] = perIterJson(oop);
  r["in_place"] = half(ip);
  if (opts_.perIter) r["in_place_per_iter"] = perIterJson(ip);
  r["actual_iterations"] = opts_.iters;
  r["experiment_name"] = ncclTestsName(opts_.coll);
  // nlccl's additions live under one key that nccl-tests' readers do not look at.
  nlohmann::ordered_json ext = {
      {"collective", opts_.collName},
      {"ranks", nranks_},
      {"algorithm", oop.algorithm.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(oop.algorithm)}};
  if (opts_.compareMpi) {
    const bool have = oop.mpiTimeUs > 0;
    ext["mpi"] = {{"time", have ? nlohmann::ordered_json(oop.mpiTimeUs) : nlohmann::ordered_json()},
                  {"bus_bw", have ? nlohmann::ordered_json(oop.mpiBusBw) : nlohmann::ordered_json()},
                  {"ratio", have ? nlohmann::ordered_json(oop.timeUs / oop.mpiTimeUs)
                                 : nlohmann::ordered_json()}};
  }
  if (modelled_)
    ext["modelled"] = {{"out_of_place", {{"time", oop.modelUs}, {"bus_bw", oop.modelBusBw}}},
                       {"in_place", {{"time", ip.modelUs}, {"bus_bw", ip.modelBusBw}}}};
  r["nlccl"] = ext;
  json_["results"].push_back(std::move(r));
}

void Reporter::csvRecord(size_t bytes, size_t count, nlcclDataType_t type, const char* op,
                         int root, bool inPlace, const Measure& m) {
  if (csv_ == nullptr) return;
  std::fprintf(csv_, "%s,%s,%d,%zu,%zu,%s,%s,%d,%d,%.3f,%.6f,%.6f,", opts_.collName.c_str(),
               m.algorithm.c_str(), nranks_, bytes, count, typeName(type), op, root,
               inPlace ? 1 : 0, m.timeUs, m.algBw, m.busBw);
  if (m.wrong >= 0) std::fprintf(csv_, "%lld", static_cast<long long>(m.wrong));
  if (opts_.compareMpi && m.mpiTimeUs > 0) {
    std::fprintf(csv_, ",%.3f,%.6f,%.6f", m.mpiTimeUs, m.mpiBusBw, m.timeUs / m.mpiTimeUs);
  } else if (opts_.compareMpi) {
    std::fprintf(csv_, ",,,");
  }
  std::fprintf(csv_, "\n");
}

void Reporter::memory(double userBytes, double scratchBytes) {
  auto mb = [](double b) { return b / (1024.0 * 1024.0); };
  std::printf("# %-20s : user buffers %.2f MB | scratch %.2f MB | Total %.2f MB\n",
              "Host memory usage", mb(userBytes), mb(scratchBytes), mb(userBytes + scratchBytes));
}

void Reporter::footer() {
  double avg = bwCount_ > 0 ? bwSum_ / bwCount_ : 0.0;
  std::printf("# %-20s : %d %s\n", "Out of bounds values", errors_, errors_ ? "FAILED" : "OK");
  std::printf("# %-20s : %g \n", "Avg bus bandwidth", avg);
  if (opts_.compareMpi && ratioCount_ > 0) {
    std::printf("# %-20s : %g (geometric mean of nlccl/MPI time, out of place; < 1: nlccl faster)\n",
                "Avg ratio to MPI", std::exp(logRatioSum_ / ratioCount_));
  }
  std::printf("#\n# Collective test concluded: %s\n", opts_.program.c_str());
  std::fflush(stdout);
  if (!jsonPath_.empty()) {
    json_["out_of_bounds"] = {{"count", errors_}, {"okay", boolStr(errors_ == 0)}};
    json_["average_bus_bandwidth"] = {{"bandwidth", avg}, {"okay", "unchecked"}};
    json_["errors"] = nlohmann::ordered_json::array();
    if (opts_.compareMpi)
      json_["nlccl"] = {{"mpi_ratio_geomean", ratioCount_ > 0
                                                  ? nlohmann::ordered_json(std::exp(logRatioSum_ / ratioCount_))
                                                  : nlohmann::ordered_json()}};
    json_["end_time"] = formatNow();
    std::ofstream out(jsonPath_);
    out << json_.dump(1) << "\n";
    if (!out) std::fprintf(stderr, "nlccl-perf: -J: writing '%s' failed\n", jsonPath_.c_str());
  }
  if (csv_ != nullptr) {
    std::fclose(csv_);
    csv_ = nullptr;
  }
}

}  // namespace nlccl::perf
