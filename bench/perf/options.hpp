// Command line of nlccl-perf: nccl-tests' single-dash flags plus -np, -t, --json, --csv and
// --compare-mpi.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "nlccl.h"

namespace nlccl::perf {

/// The collectives nlccl-perf measures.
enum class Coll { AllReduce, AllGather, ReduceScatter, Broadcast, Reduce, AlltoAll, SendRecv };

/// Everything the command line sets. Defaults are nccl-tests'.
struct Options {
  Coll coll = Coll::AllReduce;
  std::string collName = "allreduce";
  size_t minBytes = 32u << 20;
  size_t maxBytes = 32u << 20;
  size_t stepBytes = 1u << 20;
  size_t stepFactor = 1;  ///< > 1: multiply sizes; otherwise add stepBytes
  int iters = 20;
  int warmup = 5;
  int check = 1;
  int blocking = 0;
  int root = 0;  ///< -1: every root in turn (broadcast, reduce)
  std::vector<nlcclDataType_t> types{nlcclFloat};
  std::vector<nlcclRedOp_t> ops{nlcclSum};
  int threads = 1;  ///< -t: ranks as threads of this process (nlcclCommInitAll)
  int np = 0;       ///< -np: fork this many ranks (0: not given)
  bool compareMpi = false;  ///< --compare-mpi: also time the MPI equivalent (mpirun only)
  std::string jsonPath, csvPath;
};

/// Parses argv. On a bad command line prints the reason (naming the flag) and returns 2; on -h
/// prints the usage and returns 0 with *exitNow set; otherwise returns 0.
int parseOptions(int argc, char** argv, Options* opts, bool* exitNow);

/// nccl-tests' name of a type ("float", "bfloat16", "f8e4m3", ...).
const char* typeName(nlcclDataType_t t);
/// nccl-tests' name of an op ("sum", ...).
const char* opName(nlcclRedOp_t op);
/// Bytes per element.
size_t typeSize(nlcclDataType_t t);
/// The collective's name as given on the command line.
const char* collName(Coll c);
/// True for the collectives that take a reduction operator.
bool collHasOp(Coll c);
/// True for the collectives that take a root.
bool collHasRoot(Coll c);

}  // namespace nlccl::perf
