// nlccl-perf's command line: every flag of nccl-tests 2.19 (and nlccl's own) parses to its field,
// in short, glued and long form; values out of range are refused naming the flag; and every flag
// is documented in docs/nlccl-perf.md.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "options.hpp"

namespace nlccl::perf {
namespace {

int parse(std::vector<std::string> args, Options* o) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  bool exitNow = false;
  return parseOptions(static_cast<int>(argv.size()), argv.data(), o, &exitNow);
}

struct Case {
  const char* letter;    // "-b"
  const char* longName;  // "--minbytes"
  const char* value;
  std::function<bool(const Options&)> applied;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      {"-t", "--nthreads", "3", [](const Options& o) { return o.threads == 3; }},
      {"-g", "--ngpus", "2", [](const Options& o) { return o.gpus == 2 && o.ranksPerProcess() == 2; }},
      {"-b", "--minbytes", "8", [](const Options& o) { return o.minBytes == 8; }},
      {"-e", "--maxbytes", "64M", [](const Options& o) { return o.maxBytes == (64u << 20); }},
      {"-i", "--stepbytes", "4K", [](const Options& o) { return o.stepBytes == 4096; }},
      {"-f", "--stepfactor", "4", [](const Options& o) { return o.stepFactor == 4; }},
      {"-o", "--op", "mulsum", [](const Options& o) { return o.ops == std::vector<int>{kMulSum}; }},
      {"-d", "--datatype", "bfloat16",
       [](const Options& o) { return o.types == std::vector{nlcclBfloat16}; }},
      {"-r", "--root", "all", [](const Options& o) { return o.root == -1; }},
      {"-n", "--iters", "7", [](const Options& o) { return o.iters == 7; }},
      {"-w", "--warmup_iters", "0", [](const Options& o) { return o.warmup == 0; }},
      {"-m", "--agg_iters", "4", [](const Options& o) { return o.aggIters == 4; }},
      {"-a", "--average", "3", [](const Options& o) { return o.average == 3; }},
      {"-N", "--run_cycles", "2", [](const Options& o) { return o.cycles == 2; }},
      {"-p", "--parallel_init", "1", [](const Options& o) { return o.parallelInit == 1; }},
      {"-c", "--check", "5", [](const Options& o) { return o.check == 5; }},
      {"-z", "--blocking", "2", [](const Options& o) { return o.blocking == 2; }},
      {"-Z", "--null_stream", "1", [](const Options& o) { return o.nullStream == 1; }},
      {"-G", "--cudagraph", "0", [](const Options& o) { return o.graphs == 0; }},
      {"-C", "--report_cputime", "1", [](const Options& o) { return o.cpuTime == 1; }},
      {"-T", "--timeout", "30", [](const Options& o) { return o.timeoutSec == 30; }},
      {"-R", "--local_register", "2", [](const Options& o) { return o.registerMode == 2; }},
      {"-J", "--output_file", "out.json", [](const Options& o) { return o.jsonPath == "out.json"; }},
      {"-S", "--report_timestamps", "1", [](const Options& o) { return o.timestamps == 1; }},
      {"-u", "--unalign", "3", [](const Options& o) { return o.unalign == 3; }},
      {"-x", "--cta_policy", "1", [](const Options& o) { return o.ctaPolicy == 1; }},
      {"-D", "--device_implementation", "0", [](const Options& o) { return o.deviceImpl == 0; }},
      {"-V", "--device_cta_count", "32", [](const Options& o) { return o.deviceCtas == 32; }},
      {"-M", "--memory_report", "1", [](const Options& o) { return o.memReport == 1; }},
      {"-I", "--per_iter_timing", "1", [](const Options& o) { return o.perIter == 1; }},
      {"-K", "--per_iter_skip", "2", [](const Options& o) { return o.perIterSkip == 2; }},
      {"-np", "--np", "4", [](const Options& o) { return o.np == 4; }},
      {"--json", "--json", "x.json", [](const Options& o) { return o.jsonPath == "x.json"; }},
      {"--csv", "--csv", "x.csv", [](const Options& o) { return o.csvPath == "x.csv"; }},
  };
  return all;
}

TEST(PerfOptions, EveryFlagParsesToItsField) {
  for (const Case& c : cases()) {
    for (int form = 0; form < 4; ++form) {
      std::vector<std::string> args = {"nlccl-perf", "allreduce"};
      const bool glue = form == 1 && std::string(c.letter).size() == 2;
      if (form == 0 || (form == 1 && !glue)) {
        args.push_back(c.letter);
        args.push_back(c.value);
      } else if (form == 1) {
        args.push_back(std::string(c.letter) + c.value);  // -b8
      } else if (form == 2) {
        args.push_back(c.longName);
        args.push_back(c.value);
      } else {
        args.push_back(std::string(c.longName) + "=" + c.value);
      }
      if (std::string(c.letter) == "-K") args.insert(args.end(), {"-n", "5"});
      Options o;
      ASSERT_EQ(parse(args, &o), 0) << c.letter << " form " << form;
      EXPECT_TRUE(c.applied(o)) << c.letter << " " << c.value << " form " << form;
    }
  }
}

TEST(PerfOptions, NcclTestsNamesSayTheCollective) {
  for (auto [program, coll] : std::vector<std::pair<const char*, Coll>>{
           {"/opt/bin/all_reduce_perf", Coll::AllReduce},
           {"all_gather_perf", Coll::AllGather},
           {"reduce_scatter_perf_mpi", Coll::ReduceScatter},
           {"alltoallv_perf", Coll::AlltoAllv},
           {"hypercube_perf", Coll::HyperCube},
           {"scatter_perf", Coll::Scatter}}) {
    Options o;
    ASSERT_EQ(parse({program, "-b", "8", "-e", "128M", "-f", "2", "-g", "1"}, &o), 0) << program;
    EXPECT_EQ(o.coll, coll) << program;
  }
}

TEST(PerfOptions, BadValuesAreRefusedNamingTheFlag) {
  const std::vector<std::vector<std::string>> bad = {
      {"-a", "4"}, {"-z", "9"}, {"-R", "3"},  {"-G", "1"},  {"-D", "2"},     {"-V", "0"},
      {"-x", "8"}, {"-m", "0"}, {"-g", "0"},  {"-b", "1X"}, {"-o", "mean"},  {"-d", "fp4"},
      {"-r", "x"}, {"-I", "2"}, {"-q", "1"},  {"-n", "0"},  {"-K", "20"},    {"--nosuch", "1"}};
  for (const auto& b : bad) {
    Options o;
    testing::internal::CaptureStderr();
    int rc = parse({"nlccl-perf", "allreduce", b[0], b[1]}, &o);
    std::string err = testing::internal::GetCapturedStderr();
    EXPECT_EQ(rc, 2) << b[0] << " " << b[1];
    EXPECT_NE(err.find(b[0]), std::string::npos) << b[0] << ": " << err;
  }
}

TEST(PerfOptions, EveryFlagIsDocumented) {
  std::ifstream f(NLCCL_SOURCE_DIR "/docs/nlccl-perf.md");
  ASSERT_TRUE(f.good());
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string doc = ss.str();
  for (const Case& c : cases()) {
    EXPECT_NE(doc.find(std::string("`") + c.letter), std::string::npos) << c.letter;
    if (std::string(c.letter).size() == 2) {
      EXPECT_NE(doc.find(c.longName), std::string::npos) << c.longName;
    }
  }
  for (const char* extra : {"--compare-mpi", "-h", "--corrupt-result"})
    EXPECT_NE(doc.find(extra), std::string::npos) << extra;
}

}  // namespace
}  // namespace nlccl::perf
