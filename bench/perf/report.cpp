#include "report.hpp"

#include <cmath>
#include <cstdlib>
#include <fstream>

namespace nlccl::perf {

namespace {

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
  }
  return "MPI";
}

}  // namespace

Reporter::Reporter(const Options& opts, int nranks, int nThreads, const char* mode, bool modelled)
    : opts_(opts), nranks_(nranks), nThreads_(nThreads), mode_(mode), modelled_(modelled) {}

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
    std::ofstream probe(opts_.jsonPath);
    if (!probe) {
      std::fprintf(stderr, "nlccl-perf: --json: cannot write '%s'\n", opts_.jsonPath.c_str());
      return false;
    }
  }
  json_ = {{"tool", "nlccl-perf"},
           {"version", NLCCL_VERSION_CODE},
           {"collective", opts_.collName},
           {"ranks", nranks_},
           {"launch", mode_},
           {"config",
            {{"minBytes", opts_.minBytes},
             {"maxBytes", opts_.maxBytes},
             {"stepFactor", opts_.stepFactor},
             {"stepBytes", opts_.stepBytes},
             {"iters", opts_.iters},
             {"warmupIters", opts_.warmup},
             {"check", opts_.check},
             {"blocking", opts_.blocking},
             {"compareMpi", opts_.compareMpi}}},
           {"results", nlohmann::json::array()}};
  return true;
}

void Reporter::header(const std::vector<RankInfo>& ranks) {
  std::printf("# nlccl-perf version %d.%d.%d nlccl-headers=%d launch=%s\n", NLCCL_MAJOR,
              NLCCL_MINOR, NLCCL_PATCH, NLCCL_VERSION_CODE, mode_.c_str());
  std::printf("# Collective test starting: %s\n", opts_.collName.c_str());
  std::printf(
      "# nThread %d nGpus 1 minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: %d "
      "agg iters: 1 validation: %d graph: 0\n",
      nThreads_, opts_.minBytes, opts_.maxBytes,
      opts_.stepFactor > 1 ? opts_.stepFactor : opts_.stepBytes,
      opts_.stepFactor > 1 ? "factor" : "bytes", opts_.warmup, opts_.iters, opts_.check);
  if (opts_.blocking) {
    std::printf("# Blocking Enabled: wait for completion and barrier after each collective \n");
  }
  std::printf("#\n# Using devices\n");
  for (const RankInfo& r : ranks) {
    std::printf("#  Rank %2d Group %2d Pid %6d on %10.56s device %2d [host] nlccl CPU rank\n",
                r.rank, 0, r.pid, r.host, r.rank);
  }
  std::printf("#\n");
  // The column layout of nccl-tests 2.x output (one space before #wrong), without trailing blanks;
  // --compare-mpi appends two columns, so the first thirteen stay where scripts expect them.
  const bool mpi = opts_.compareMpi;
  std::printf("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place",
              "", "", "", "", "");
  if (mpi) std::printf("  %16s", mpiName(opts_.coll));
  if (modelled_) std::printf("     modelled (neuronlink): out-of-place   in-place");
  std::printf("\n# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s", "size",
              "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw",
              "busbw", "#wrong");
  if (mpi) std::printf("  %8s  %6s", "mpi time", "ratio");
  if (modelled_) std::printf("  %8s  %6s  %8s  %6s", "mtime", "mbusbw", "mtime", "mbusbw");
  std::printf("\n# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s", "(B)",
              "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)");
  if (mpi) std::printf(" %6s  %8s  %6s", "", "(us)", "nl/mpi");
  if (modelled_) std::printf("%s  %8s  %6s  %8s  %6s", mpi ? "" : "       ", "(us)", "(GB/s)", "(us)", "(GB/s)");
  std::printf("\n");
  std::fflush(stdout);
}

void Reporter::row(size_t bytes, size_t count, nlcclDataType_t type, const char* op, int root,
                   const Measure& oop, const Measure& ip) {
  std::printf("%12zu  %12zu  %8s  %6s  %6d", bytes, count, typeName(type), op, root);
  for (const Measure* m : {&oop, &ip}) {
    if (m->wrong >= 0) {
      std::printf("  %7s  %6s  %6s %6g", floatStr(m->timeUs, 7).c_str(),
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
  std::printf("\n");
  std::fflush(stdout);
  record(bytes, count, type, op, root, false, oop);
  record(bytes, count, type, op, root, true, ip);
}

void Reporter::record(size_t bytes, size_t count, nlcclDataType_t type, const char* op, int root,
                      bool inPlace, const Measure& m) {
  const char* algo = m.algorithm.c_str();
  if (csv_ != nullptr) {
    std::fprintf(csv_, "%s,%s,%d,%zu,%zu,%s,%s,%d,%d,%.3f,%.6f,%.6f,", opts_.collName.c_str(),
                 algo, nranks_, bytes, count, typeName(type), op, root, inPlace ? 1 : 0,
                 m.timeUs, m.algBw, m.busBw);
    if (m.wrong >= 0) std::fprintf(csv_, "%lld", static_cast<long long>(m.wrong));
    if (opts_.compareMpi && m.mpiTimeUs > 0) {
      std::fprintf(csv_, ",%.3f,%.6f,%.6f", m.mpiTimeUs, m.mpiBusBw, m.timeUs / m.mpiTimeUs);
    } else if (opts_.compareMpi) {
      std::fprintf(csv_, ",,,");
    }
    std::fprintf(csv_, "\n");
  }
  if (!opts_.jsonPath.empty()) {
    nlohmann::json r = {{"collective", opts_.collName},
                        {"algorithm", m.algorithm.empty() ? nlohmann::json() : nlohmann::json(m.algorithm)},
                        {"ranks", nranks_},
                        {"bytes", bytes},
                        {"count", count},
                        {"type", typeName(type)},
                        {"redop", op},
                        {"root", root},
                        {"in_place", inPlace},
                        {"time_us", m.timeUs},
                        {"algbw_GBps", m.algBw},
                        {"busbw_GBps", m.busBw},
                        {"wrong", m.wrong >= 0 ? nlohmann::json(m.wrong) : nlohmann::json()}};
    if (opts_.compareMpi) {
      const bool have = m.mpiTimeUs > 0;  // out of place, and MPI has an equivalent
      r["mpi_time_us"] = have ? nlohmann::json(m.mpiTimeUs) : nlohmann::json();
      r["mpi_busbw_GBps"] = have ? nlohmann::json(m.mpiBusBw) : nlohmann::json();
      r["mpi_ratio"] = have ? nlohmann::json(m.timeUs / m.mpiTimeUs) : nlohmann::json();
    }
    if (modelled_) {
      r["model_time_us"] = m.modelUs;
      r["model_busbw_GBps"] = m.modelBusBw;
    }
    json_["results"].push_back(std::move(r));
  }
}

int Reporter::footer() {
  double avg = bwCount_ > 0 ? bwSum_ / bwCount_ : 0.0;
  std::printf("# %-20s : %d %s\n", "Out of bounds values", errors_, errors_ ? "FAILED" : "OK");
  std::printf("# %-20s : %g\n", "Avg bus bandwidth", avg);
  if (opts_.compareMpi && ratioCount_ > 0) {
    std::printf("# %-20s : %g (geometric mean of nlccl/MPI time, out of place; < 1: nlccl faster)\n",
                "Avg ratio to MPI", std::exp(logRatioSum_ / ratioCount_));
  }
  std::printf("#\n# Collective test concluded: %s\n", opts_.collName.c_str());
  std::fflush(stdout);
  if (!opts_.jsonPath.empty()) {
    json_["out_of_bounds"] = errors_;
    json_["avg_busbw_GBps"] = avg;
    if (opts_.compareMpi) {
      json_["mpi_ratio_geomean"] =
          ratioCount_ > 0 ? nlohmann::json(std::exp(logRatioSum_ / ratioCount_)) : nlohmann::json();
    }
    std::ofstream out(opts_.jsonPath);
    out << json_.dump(1) << "\n";
    if (!out) std::fprintf(stderr, "nlccl-perf: --json: writing '%s' failed\n",
                           opts_.jsonPath.c_str());
  }
  if (csv_ != nullptr) {
    std::fclose(csv_);
    csv_ = nullptr;
  }
  return errors_;
}

}  // namespace nlccl::perf
