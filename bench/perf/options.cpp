// Hand-written parser: nccl-tests' flags are single-dash letters taking a value ("-b 8", "-b8"),
// with getopt-style long names ("--minbytes 8", "--minbytes=8"), and "-np" is a two-letter flag,
// which CLI11 does not model well. Every flag of nccl-tests 2.19 is accepted with its meaning;
// docs/nlccl-perf.md says how each applies on a host.
#include "options.hpp"
#include "moe_pattern.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "util/dtype.hpp"
#include "util/size_parse.hpp"

namespace nlccl::perf {

// nlccl.h's type and op values are util/dtype.hpp's (the library converts with a cast too), so the
// name and size tables there serve this C-API user as well.
static_assert(nlcclNumTypes == kNumDataTypes && nlcclNumOps == kNumRedOps);
static_assert(nlcclHalf == static_cast<int>(DataType::Float16) &&
              nlcclBfloat16 == static_cast<int>(DataType::Bfloat16) &&
              nlcclFloat8e5m2 == static_cast<int>(DataType::Float8e5m2) &&
              nlcclAvg == static_cast<int>(RedOp::Avg));

namespace {

struct CollInfo {
  const char* name;     // nlccl-perf's positional name
  Coll coll;
  const char* program;  // nccl-tests' binary
  const char* test;     // nccl-tests' test name (JSON experiment_name)
};
const CollInfo kColls[] = {
    {"allreduce", Coll::AllReduce, "all_reduce_perf", "AllReduce"},
    {"allgather", Coll::AllGather, "all_gather_perf", "AllGather"},
    {"reducescatter", Coll::ReduceScatter, "reduce_scatter_perf", "ReduceScatter"},
    {"broadcast", Coll::Broadcast, "broadcast_perf", "Broadcast"},
    {"reduce", Coll::Reduce, "reduce_perf", "Reduce"},
    {"alltoall", Coll::AlltoAll, "alltoall_perf", "AlltoAll"},
    {"sendrecv", Coll::SendRecv, "sendrecv_perf", "SendRecv"},
    {"alltoallv", Coll::AlltoAllv, "alltoallv_perf", "AlltoAllv"},
    {"gather", Coll::Gather, "gather_perf", "Gather"},
    {"scatter", Coll::Scatter, "scatter_perf", "Scatter"},
    {"hypercube", Coll::HyperCube, "hypercube_perf", "HyperCube"}};

const CollInfo& info(Coll c) { return kColls[static_cast<int>(c)]; }

void usage(FILE* f) {
  std::fprintf(
      f,
      "usage: nlccl-perf <collective> [flags]   (or as all_reduce_perf, ... [flags])\n"
      "  collective: allreduce allgather reducescatter broadcast reduce alltoall alltoallv\n"
      "              sendrecv gather scatter hypercube\n"
      "  -t,--nthreads <n>            rank threads per process (default 1)\n"
      "  -g,--ngpus <n>               GPUs per thread: each is one more rank thread (default 1)\n"
      "  -b,--minbytes <size>         smallest size (K/M/G suffixes; default 32M)\n"
      "  -e,--maxbytes <size>         largest size (default 32M)\n"
      "  -i,--stepbytes <size>        add this to the size each step (default 1M)\n"
      "  -f,--stepfactor <n>          multiply the size by n each step (default: add -i)\n"
      "  -o,--op <op/all>             sum prod max min avg mulsum (default sum)\n"
      "  -d,--datatype <type/all>     int8 uint8 int32 uint32 int64 uint64 half float double\n"
      "                               bfloat16 f8e4m3 f8e5m2 (default float)\n"
      "  -r,--root <root/all>         root of rooted collectives; all (or -1): every root\n"
      "  -n,--iters <n>               timed iterations (default 20)\n"
      "  -w,--warmup_iters <n>        warm-up iterations (default 5)\n"
      "  -m,--agg_iters <n>           collectives per iteration, in one group (default 1)\n"
      "  -a,--average <0/1/2/3>       time over ranks: rank 0, mean, min, max (default 1)\n"
      "  -N,--run_cycles <n>          sweeps of all sizes; 0 runs until killed (default 1)\n"
      "  -p,--parallel_init <0/1>     rank threads make their communicators concurrently\n"
      "  -c,--check <n>               checked iterations per size; 0: none (default 1)\n"
      "  -z,--blocking <0/1/2/3>      1: sync and barrier after each call; 2, 3: sync only\n"
      "  -Z,--null_stream <0/1>       1: every call on the NULL stream (blocking, as MPI's)\n"
      "  -G,--cudagraph <n>           CUDA graph launches: only 0 (no graphs on a host)\n"
      "  -C,--report_cputime <0/1>    label times cputime (they are host times)\n"
      "  -T,--timeout <seconds>       end a test that runs longer (default: none)\n"
      "  -R,--local_register <0/1/2>  1: nlcclCommRegister the buffers, 2: symmetric windows\n"
      "  -J,--output_file <file>      nccl-tests' JSON (an existing file gets .0, .1, ...)\n"
      "  -S,--report_timestamps <0/1> a timestamp column\n"
      "  -u,--unalign <n>             buffers start n elements past an aligned address\n"
      "  -x,--cta_policy <0..3>       nlcclConfig_t.CTAPolicy (accepted, no CTAs on a host)\n"
      "  -D,--device_implementation <n>  only 0 (no device-side implementations on a host)\n"
      "  -V,--device_cta_count <n>    CTAs for -D (1..127; nothing to apply it to)\n"
      "  -M,--memory_report <0/1>     report the memory used\n"
      "  -I,--per_iter_timing <0/1>   per-iteration statistics (i_min i_max i_p99 i_cv%%)\n"
      "  -K,--per_iter_skip <n>       leave the first n iterations out of them\n"
      "  -np <n>                      fork n processes\n"
      "  --json <file>                as -J\n"
      "  --csv <file>                 the results as CSV\n"
      "  --compare-mpi                also time MPI's equivalent (under mpirun only)\n"
      "  --moe tokens=N[,topk=K,experts=E,dist=D,placement=P,cf=C,routing=R,seed=S]\n"
      "                               alltoallv: per-peer sizes from the MoE routing generator\n"
      "  -h,--help                    this text\n"
      "Under mpirun (built with MPI) each process holds -t x -g ranks.\n");
}

int bad(const std::string& flag, const char* value, const char* what) {
  if (flag == value) {
    std::fprintf(stderr, "nlccl-perf: %s: %s (see nlccl-perf -h)\n", flag.c_str(), what);
    return 2;
  }
  std::fprintf(stderr, "nlccl-perf: %s '%s': %s (see nlccl-perf -h)\n", flag.c_str(), value,
               what);
  return 2;
}

bool parseInt(const char* s, long long lo, long long hi, long long* out) {
  if (s == nullptr || *s == '\0') return false;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(s, &end, 0);
  if (errno != 0 || *end != '\0' || v < lo || v > hi) return false;
  *out = v;
  return true;
}

/// nccl-tests' parsesize (util::parseSize), overflow-checked; the reason goes into `why`.
bool parseSize(const char* s, size_t* out, std::string* why) {
  uint64_t v = 0;
  if (!util::parseSize(s, &v, why)) return false;
  *out = static_cast<size_t>(v);
  return true;
}

bool parseType(const char* s, nlcclDataType_t* out) {
  DataType t;
  if (!parseDataType(s, &t)) return false;
  *out = static_cast<nlcclDataType_t>(t);
  return true;
}

/// The value-taking letter flags with nccl-tests' long names, and the integer range of each
/// (sizes, types, ops and roots are parsed apart).
struct Flag {
  char letter;
  const char* longName;
  long long lo, hi;
  int Options::*field;
  const char* range;  // for messages
};
constexpr long long kBig = 1 << 30;
const Flag kFlags[] = {
    {'t', "nthreads", 1, 1024, &Options::threads, "a thread count 1..1024"},
    {'g', "ngpus", 1, 1024, &Options::gpus, "a count 1..1024"},
    {'n', "iters", 1, kBig, &Options::iters, "iterations >= 1"},
    {'w', "warmup_iters", 0, kBig, &Options::warmup, "iterations >= 0"},
    {'m', "agg_iters", 1, 1 << 16, &Options::aggIters, "a count >= 1"},
    {'a', "average", 0, 3, &Options::average, "0 (rank 0), 1 (mean), 2 (min) or 3 (max)"},
    {'N', "run_cycles", 0, kBig, &Options::cycles, "cycles >= 0 (0: until killed)"},
    {'p', "parallel_init", 0, 1, &Options::parallelInit, "0 or 1"},
    {'c', "check", 0, kBig, &Options::check, "checked iterations >= 0"},
    {'z', "blocking", 0, 3, &Options::blocking, "0, 1, 2 or 3"},
    {'Z', "null_stream", 0, 1, &Options::nullStream, "0 or 1"},
    {'G', "cudagraph", 0, kBig, &Options::graphs, "graph launches >= 0"},
    {'C', "report_cputime", 0, 1, &Options::cpuTime, "0 or 1"},
    {'T', "timeout", 0, 1 << 24, &Options::timeoutSec, "seconds >= 0"},
    {'R', "local_register", 0, 2, &Options::registerMode, "0, 1 or 2"},
    {'S', "report_timestamps", 0, 1, &Options::timestamps, "0 or 1"},
    {'x', "cta_policy", 0, 3, &Options::ctaPolicy, "a policy 0..3 (NLCCL_CTA_POLICY_* bits)"},
    {'D', "device_implementation", 0, 64, &Options::deviceImpl, "an implementation number"},
    {'V', "device_cta_count", 1, 127, &Options::deviceCtas, "a count 1..127"},
    {'M', "memory_report", 0, 1, &Options::memReport, "0 or 1"},
    {'I', "per_iter_timing", 0, 1, &Options::perIter, "0 or 1"},
    {'K', "per_iter_skip", 0, kBig, &Options::perIterSkip, "iterations >= 0"},
};
/// Letters whose values are parsed apart (sizes, type, op, root, output file, unalign).
struct NamedFlag {
  char letter;
  const char* longName;
};
const NamedFlag kNamed[] = {{'b', "minbytes"},    {'e', "maxbytes"},  {'i', "stepbytes"},
                       {'f', "stepfactor"},  {'d', "datatype"},  {'o', "op"},
                       {'r', "root"},        {'J', "output_file"}, {'u', "unalign"}};
/// Long names nccl-tests' documentation also uses for these letters.
const NamedFlag kAliases[] = {{'M', "memory"}};

char letterOf(const std::string& longName) {
  for (const Flag& f : kFlags)
    if (longName == f.longName) return f.letter;
  for (const NamedFlag& f : kNamed)
    if (longName == f.longName) return f.letter;
  for (const NamedFlag& f : kAliases)
    if (longName == f.longName) return f.letter;
  return 0;
}
const Flag* intFlag(char letter) {
  for (const Flag& f : kFlags)
    if (f.letter == letter) return &f;
  return nullptr;
}
bool namedLetter(char letter) {
  for (const NamedFlag& f : kNamed)
    if (f.letter == letter) return true;
  return false;
}

bool parseOp(const char* s, int* out) {
  if (std::strcmp(s, "mulsum") == 0) {
    *out = kMulSum;
    return true;
  }
  RedOp op;
  if (!parseRedOp(s, &op)) return false;
  *out = static_cast<int>(op);
  return true;
}

std::string baseName(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}

}  // namespace

bool collFromProgram(const std::string& name, Coll* out) {
  for (const CollInfo& c : kColls) {
    // nccl-tests' builds may add a suffix (NAME_SUFFIX, e.g. all_reduce_perf_mpi).
    if (name.rfind(c.program, 0) == 0) {
      *out = c.coll;
      return true;
    }
  }
  return false;
}
const char* ncclTestsProgram(Coll c) { return info(c).program; }
const char* ncclTestsName(Coll c) { return info(c).test; }
const char* typeName(nlcclDataType_t t) { return dataTypeName(static_cast<DataType>(t)); }
const char* opName(int op) {
  return op == kMulSum ? "mulsum" : redOpName(static_cast<RedOp>(op));
}
size_t typeSize(nlcclDataType_t t) { return dataTypeSize(static_cast<DataType>(t)); }
const char* collName(Coll c) { return info(c).name; }
bool collHasOp(Coll c) {
  return c == Coll::AllReduce || c == Coll::ReduceScatter || c == Coll::Reduce;
}
bool collHasRoot(Coll c) {
  return c == Coll::Broadcast || c == Coll::Reduce || c == Coll::Gather || c == Coll::Scatter;
}

int parseOptions(int argc, char** argv, Options* o, bool* exitNow) {
  *exitNow = false;
  for (int i = 0; i < argc; ++i) o->args.push_back(argv[i]);
  bool haveColl = false;
  const std::string program = argc > 0 ? baseName(argv[0]) : "nlccl-perf";
  if (collFromProgram(program, &o->coll)) {
    o->collName = collName(o->coll);
    o->program = program;
    haveColl = true;
  }
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "-h" || a == "--help") {
      usage(stdout);
      *exitNow = true;
      return 0;
    }
    if (a.empty() || a[0] != '-' || a == "-") {
      Coll c;
      bool found = false;
      for (const CollInfo& ci : kColls)
        if (a == ci.name) {
          c = ci.coll;
          found = true;
        }
      if (!found) return bad("<collective>", argv[i], "unknown collective");
      if (haveColl && c != o->coll) return bad("<collective>", argv[i], "a second collective");
      o->coll = c;
      o->collName = collName(c);
      if (o->program == "nlccl-perf") o->program = o->collName;
      haveColl = true;
      continue;
    }
    if (a == "--compare-mpi") {  // the one flag without a value
      o->compareMpi = true;
      continue;
    }
    // Which flag, and where its value is.
    std::string flag(a);
    const char* value = nullptr;
    char letter = 0;
    std::string longName;
    if (a.rfind("--", 0) == 0) {
      size_t eq = a.find('=');
      longName = std::string(a.substr(2, eq == std::string_view::npos ? a.npos : eq - 2));
      flag = "--" + longName;
      if (eq != std::string_view::npos) value = argv[i] + eq + 1;
    } else if (a == "-np") {
      longName = "np";
    } else {
      letter = a[1];
      flag = std::string("-") + letter;
      if (a.size() > 2) value = argv[i] + 2;
    }
    const bool nlcclLong = longName == "np" || longName == "json" || longName == "csv" ||
                           longName == "corrupt-result" || longName == "moe";
    if (!longName.empty() && !nlcclLong) {
      letter = letterOf(longName);
      if (letter == 0) return bad(flag, argv[i], "unknown flag");
    }
    if (letter != 0 && !intFlag(letter) && !namedLetter(letter))
      return bad(flag, argv[i], "unknown flag");
    if (value == nullptr) {
      if (i + 1 >= argc) return bad(flag, "", "missing value");
      value = argv[++i];
    }
    long long v = 0;
    std::string why;
    if (nlcclLong) {
      if (longName == "np") {
        if (!parseInt(value, 1, 4096, &v)) return bad(flag, value, "need a rank count in 1..4096");
        o->np = static_cast<int>(v);
      } else if (longName == "moe") {
        if (!setMoeSpec(value, &why)) return bad(flag, value, why.c_str());
      } else if (longName == "corrupt-result") {
        if (!parseInt(value, 0, 1 << 20, &v)) return bad(flag, value, "need a rank");
        o->corruptRank = static_cast<int>(v);
      } else {
        if (*value == '\0') return bad(flag, value, "need a file name");
        (longName == "json" ? o->jsonPath : o->csvPath) = value;
      }
      continue;
    }
    if (const Flag* f = intFlag(letter)) {
      if (!parseInt(value, f->lo, f->hi, &v)) return bad(flag, value, (std::string("need ") + f->range).c_str());
      o->*(f->field) = static_cast<int>(v);
      continue;
    }
    switch (letter) {
      case 'b':
        if (!parseSize(value, &o->minBytes, &why)) return bad(flag, value, why.c_str());
        break;
      case 'e':
        if (!parseSize(value, &o->maxBytes, &why)) return bad(flag, value, why.c_str());
        break;
      case 'i':
        if (!parseSize(value, &o->stepBytes, &why)) return bad(flag, value, why.c_str());
        break;
      case 'f':
        if (!parseInt(value, 1, 1 << 20, &v)) return bad(flag, value, "need a factor >= 1");
        o->stepFactor = static_cast<size_t>(v);
        break;
      case 'u':
        if (!parseInt(value, 0, 1 << 20, &v)) return bad(flag, value, "need elements >= 0");
        o->unalign = static_cast<size_t>(v);
        break;
      case 'r':
        if (std::strcmp(value, "all") == 0) {
          o->root = -1;
        } else if (!parseInt(value, -1, 1 << 20, &v)) {
          return bad(flag, value, "need a rank, all or -1");
        } else {
          o->root = static_cast<int>(v);
        }
        break;
      case 'J':
        if (*value == '\0') return bad(flag, value, "need a file name");
        o->jsonPath = value;
        break;
      case 'd': {
        o->types.clear();
        if (std::strcmp(value, "all") == 0) {
          for (int t = 0; t < nlcclNumTypes; ++t) o->types.push_back(nlcclDataType_t(t));
        } else {
          nlcclDataType_t t;
          if (!parseType(value, &t)) return bad(flag, value, "unknown datatype");
          o->types.push_back(t);
        }
        break;
      }
      case 'o': {
        o->ops.clear();
        if (std::strcmp(value, "all") == 0) {
          for (int op = 0; op <= kMulSum; ++op) o->ops.push_back(op);
        } else {
          int op;
          if (!parseOp(value, &op))
            return bad(flag, value, "unknown op (sum prod max min avg mulsum all)");
          o->ops.push_back(op);
        }
        break;
      }
      default:
        return bad(flag, argv[i], "unknown flag");
    }
  }
  if (!haveColl) {
    std::fprintf(stderr, "nlccl-perf: <collective>: missing (see nlccl-perf -h)\n");
    return 2;
  }
  if (o->minBytes > o->maxBytes) {
    std::fprintf(stderr, "nlccl-perf: -b: minbytes %zu is larger than -e maxbytes %zu\n",
                 o->minBytes, o->maxBytes);
    return 2;
  }
  if (o->stepFactor <= 1 && o->stepBytes == 0 && o->minBytes < o->maxBytes) {
    std::fprintf(stderr, "nlccl-perf: -i: stepbytes 0 with -f 1 never reaches maxbytes\n");
    return 2;
  }
  if (o->stepFactor > 1 && o->minBytes == 0 && o->maxBytes > 0) {
    std::fprintf(stderr, "nlccl-perf: -b: minbytes 0 with -f %zu never grows\n", o->stepFactor);
    return 2;
  }
  if (o->graphs > 0) {
    std::fprintf(stderr,
                 "nlccl-perf: -G: %d graph launches asked for, but there are no CUDA graphs on a "
                 "host (nlccl runs its collectives on host threads); use -G 0\n",
                 o->graphs);
    return 2;
  }
  if (o->deviceImpl > 0) {
    std::fprintf(stderr,
                 "nlccl-perf: -D: device implementation %d asked for, but there are no "
                 "device-side kernels on a host; use -D 0\n",
                 o->deviceImpl);
    return 2;
  }
  if (o->ranksPerProcess() > 1024) {
    std::fprintf(stderr, "nlccl-perf: -t x -g: %d ranks per process is more than 1024\n",
                 o->ranksPerProcess());
    return 2;
  }
  if (moeActive() && o->coll != Coll::AlltoAllv) {
    std::fprintf(stderr, "nlccl-perf: --moe: per-peer sizes apply to alltoallv only\n");
    return 2;
  }
  if (o->perIterSkip > 0 && o->perIterSkip >= o->iters) {
    std::fprintf(stderr, "nlccl-perf: -K: skipping %d of %d iterations leaves none\n",
                 o->perIterSkip, o->iters);
    return 2;
  }
  return 0;
}

}  // namespace nlccl::perf
