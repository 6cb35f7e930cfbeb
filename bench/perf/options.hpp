// Command line of nlccl-perf: nccl-tests' flags with nccl-tests' meanings (as far as they apply
// on a host), plus -np, --csv, --compare-mpi and a test hook.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "nlccl.h"

namespace nlccl::perf {

/// The collectives nlccl-perf measures.
enum class Coll {
  AllReduce,
  AllGather,
  ReduceScatter,
  Broadcast,
  Reduce,
  AlltoAll,
  SendRecv,
  AlltoAllv,
  Gather,
  Scatter,
  HyperCube,
};

/// nccl-tests' "mulsum": a PreMulSum operator (nlcclRedOpCreatePreMulSum), after the built-ins.
constexpr int kMulSum = nlcclNumOps;

/// Everything the command line sets. Defaults are nccl-tests'.
struct Options {
  Coll coll = Coll::AllReduce;
  std::string collName = "allreduce";
  std::string program = "nlccl-perf";  ///< what the header calls the test (argv[0] for links)
  std::vector<std::string> args;       ///< the command line, for -J
  size_t minBytes = 32u << 20;
  size_t maxBytes = 32u << 20;
  size_t stepBytes = 1u << 20;
  size_t stepFactor = 1;  ///< > 1: multiply sizes; otherwise add stepBytes
  int iters = 20;
  int warmup = 5;
  int aggIters = 1;    ///< -m: collectives per timed iteration, issued in one group
  int average = 1;     ///< -a: time across ranks, 0 rank 0, 1 mean, 2 min, 3 max
  int cycles = 1;      ///< -N: sweeps of every size (0: until killed)
  int parallelInit = 0;  ///< -p: rank threads make their communicators concurrently
  int check = 1;       ///< -c: checked iterations per size (0: no checking)
  int blocking = 0;    ///< -z: 1 sync and barrier after each call, 2 or 3 sync only
  int nullStream = 0;  ///< -Z: 1 issues every call on the NULL stream (blocking, as MPI's are)
  int root = 0;        ///< -1: every root in turn
  std::vector<nlcclDataType_t> types{nlcclFloat};
  std::vector<int> ops{nlcclSum};  ///< nlcclRedOp_t values and kMulSum
  int threads = 1;     ///< -t: rank threads per process
  int gpus = 1;        ///< -g: "GPUs" per thread; each is one more rank thread here
  int np = 0;          ///< -np: fork this many processes (0: not given)
  int graphs = 0;      ///< -G: refused above 0 (no CUDA graphs on a host)
  int cpuTime = 0;     ///< -C: label times as cputime (they are host times either way)
  int timeoutSec = 0;  ///< -T: end a test that runs longer (0: no limit)
  int registerMode = 0;  ///< -R: 1 nlcclCommRegister, 2 nlcclCommWindowRegister (symmetric)
  int timestamps = 0;  ///< -S: a timestamp column
  size_t unalign = 0;  ///< -u: buffers start this many elements past an aligned address
  int ctaPolicy = -1;  ///< -x: nlcclConfig_t.CTAPolicy (-1: not set)
  int deviceImpl = 0;  ///< -D: refused above 0 (no device-side implementations on a host)
  int deviceCtas = 16;  ///< -V: CTAs of -D's kernels; accepted, nothing to apply it to
  int memReport = 0;   ///< -M: report the memory used
  int perIter = 0;     ///< -I: per-iteration times (i_min, i_max, i_p99, i_cv%)
  int perIterSkip = 0;  ///< -K: iterations left out of the per-iteration statistics
  bool compareMpi = false;  ///< --compare-mpi: also time the MPI equivalent (mpirun only)
  std::string jsonPath, csvPath;  ///< -J / --json (nccl-tests' JSON), --csv
  int corruptRank = -1;  ///< test hook --corrupt-result R: rank R spoils one checked element
  /// Ranks per process.
  int ranksPerProcess() const { return threads * gpus; }
};

/// Parses argv. On a bad command line prints the reason (naming the flag) and returns 2; on -h
/// prints the usage and returns 0 with *exitNow set; otherwise returns 0. When argv[0] is one of
/// nccl-tests' names (all_reduce_perf, ...), that is the collective.
int parseOptions(int argc, char** argv, Options* opts, bool* exitNow);

/// The collective nccl-tests' binary `name` (e.g. "all_reduce_perf") measures; false if none.
bool collFromProgram(const std::string& name, Coll* out);
/// nccl-tests' binary name of a collective ("all_reduce_perf") and its test name ("AllReduce").
const char* ncclTestsProgram(Coll c);
const char* ncclTestsName(Coll c);

/// nccl-tests' name of a type ("float", "bfloat16", "f8e4m3", ...).
const char* typeName(nlcclDataType_t t);
/// nccl-tests' name of an op ("sum", ..., "mulsum").
const char* opName(int op);
/// Bytes per element.
size_t typeSize(nlcclDataType_t t);
/// The collective's name as given on the command line.
const char* collName(Coll c);
/// True for the collectives that take a reduction operator.
bool collHasOp(Coll c);
/// True for the collectives that take a root.
bool collHasRoot(Coll c);

}  // namespace nlccl::perf
