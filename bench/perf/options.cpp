// Hand-written parser: nccl-tests' flags are single-dash letters taking a value ("-b 8", "-b8"),
// with getopt-style long names ("--minbytes 8", "--minbytes=8"), and "-np" is a two-letter flag,
// which CLI11 does not model well.
#include "options.hpp"

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

struct CollName {
  const char* name;
  Coll coll;
};
const CollName kColls[] = {{"allreduce", Coll::AllReduce},         {"allgather", Coll::AllGather},
                           {"reducescatter", Coll::ReduceScatter}, {"broadcast", Coll::Broadcast},
                           {"reduce", Coll::Reduce},               {"alltoall", Coll::AlltoAll},
                           {"sendrecv", Coll::SendRecv}};

void usage(FILE* f) {
  std::fprintf(f,
               "usage: nlccl-perf <collective> [flags]\n"
               "  collective: allreduce allgather reducescatter broadcast reduce alltoall sendrecv\n"
               "  -b,--minbytes <size>      smallest size (K/M/G suffixes; default 32M)\n"
               "  -e,--maxbytes <size>      largest size (default 32M)\n"
               "  -f,--stepfactor <n>       multiply the size by n each step\n"
               "  -i,--stepbytes <size>     add this to the size each step (when -f is 1)\n"
               "  -n,--iters <n>            timed iterations (default 20)\n"
               "  -w,--warmup_iters <n>     warm-up iterations (default 5)\n"
               "  -c,--check <0/1>          check results (default 1)\n"
               "  -d,--datatype <type/all>  int8 uint8 int32 uint32 int64 uint64 half float double\n"
               "                            bfloat16 f8e4m3 f8e5m2 (default float)\n"
               "  -o,--op <op/all>          sum prod max min avg (default sum)\n"
               "  -r,--root <root>          root of broadcast/reduce; -1 runs every root\n"
               "  -z,--blocking <0/1>       wait and barrier after each collective\n"
               "  -t,--nthreads <n>         ranks as n threads of this process\n"
               "  -np <n>                   fork n ranks (processes)\n"
               "  --json <file>             write the results as JSON\n"
               "  --csv <file>              write the results as CSV\n"
               "  --compare-mpi             also time the MPI equivalent (under mpirun only)\n"
               "  -h,--help                 this text\n"
               "Under mpirun (built with MPI) each process is one rank.\n");
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

/// Long names of the value-taking letter flags, as nccl-tests spells them.
struct Flag {
  char letter;
  const char* longName;
};
const Flag kFlags[] = {{'b', "minbytes"}, {'e', "maxbytes"},     {'f', "stepfactor"},
                       {'i', "stepbytes"}, {'n', "iters"},       {'w', "warmup_iters"},
                       {'c', "check"},    {'d', "datatype"},     {'o', "op"},
                       {'r', "root"},     {'z', "blocking"},     {'t', "nthreads"}};

}  // namespace

const char* typeName(nlcclDataType_t t) { return dataTypeName(static_cast<DataType>(t)); }
const char* opName(nlcclRedOp_t op) { return redOpName(static_cast<RedOp>(op)); }
size_t typeSize(nlcclDataType_t t) { return dataTypeSize(static_cast<DataType>(t)); }
const char* collName(Coll c) { return kColls[static_cast<int>(c)].name; }
bool collHasOp(Coll c) {
  return c == Coll::AllReduce || c == Coll::ReduceScatter || c == Coll::Reduce;
}
bool collHasRoot(Coll c) { return c == Coll::Broadcast || c == Coll::Reduce; }

int parseOptions(int argc, char** argv, Options* o, bool* exitNow) {
  *exitNow = false;
  bool haveColl = false;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "-h" || a == "--help") {
      usage(stdout);
      *exitNow = true;
      return 0;
    }
    if (a.empty() || a[0] != '-' || a == "-") {
      if (haveColl) return bad("<collective>", argv[i], "a second collective name");
      bool found = false;
      for (const CollName& c : kColls) {
        if (a == c.name) {
          o->coll = c.coll;
          o->collName = c.name;
          found = true;
        }
      }
      if (!found) return bad("<collective>", argv[i], "unknown collective");
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
    if (!longName.empty() && longName != "np" && longName != "json" && longName != "csv") {
      for (const Flag& f : kFlags) {
        if (longName == f.longName) letter = f.letter;
      }
      if (letter == 0) return bad(flag, argv[i], "unknown flag");
    }
    if (letter != 0) {
      bool known = false;
      for (const Flag& f : kFlags) known = known || f.letter == letter;
      if (!known) return bad(flag, argv[i], "unknown flag");
    }
    if (value == nullptr) {
      if (i + 1 >= argc) return bad(flag, "", "missing value");
      value = argv[++i];
    }
    long long v = 0;
    if (longName == "np") {
      if (!parseInt(value, 1, 4096, &v)) return bad(flag, value, "need a rank count in 1..4096");
      o->np = static_cast<int>(v);
      continue;
    }
    if (longName == "json" || longName == "csv") {
      if (*value == '\0') return bad(flag, value, "need a file name");
      (longName == "json" ? o->jsonPath : o->csvPath) = value;
      continue;
    }
    std::string why;
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
      case 'n':
        if (!parseInt(value, 1, 1 << 30, &v)) return bad(flag, value, "need iterations >= 1");
        o->iters = static_cast<int>(v);
        break;
      case 'w':
        if (!parseInt(value, 0, 1 << 30, &v)) return bad(flag, value, "need iterations >= 0");
        o->warmup = static_cast<int>(v);
        break;
      case 'c':
        if (!parseInt(value, 0, 1, &v)) return bad(flag, value, "need 0 or 1");
        o->check = static_cast<int>(v);
        break;
      case 'z':
        if (!parseInt(value, 0, 1, &v)) return bad(flag, value, "need 0 or 1");
        o->blocking = static_cast<int>(v);
        break;
      case 'r':
        if (!parseInt(value, -1, 1 << 20, &v)) return bad(flag, value, "need a rank or -1");
        o->root = static_cast<int>(v);
        break;
      case 't':
        if (!parseInt(value, 1, 1024, &v)) return bad(flag, value, "need a thread count 1..1024");
        o->threads = static_cast<int>(v);
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
          for (int op = 0; op < nlcclNumOps; ++op) o->ops.push_back(nlcclRedOp_t(op));
        } else {
          RedOp op;
          if (!parseRedOp(value, &op))
            return bad(flag, value, "unknown op (sum prod max min avg all)");
          o->ops.push_back(static_cast<nlcclRedOp_t>(op));
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
  if (o->np > 0 && o->threads > 1) {
    std::fprintf(stderr, "nlccl-perf: -np: cannot be combined with -t (one rank per process)\n");
    return 2;
  }
  return 0;
}

}  // namespace nlccl::perf
