// Text forms of the generator's inputs: distributions (uniform, zipf:S, hot:F[:N], a CSV of
// loads) and placements (contiguous, round-robin, a file of ranks).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "nlccl/moe.hpp"

namespace nlccl::moe {
namespace {

Status fail(std::string* error, const std::string& why) {
  if (error) *error = why;
  return Status::InvalidArgument;
}

bool number(const std::string& text, double* out) {
  if (text.empty()) return false;
  char* end = nullptr;
  *out = std::strtod(text.c_str(), &end);
  return end && *end == '\0' && std::isfinite(*out);
}

/// The numbers of a file: one per line or comma-separated; of a line with several fields, the
/// last (so `expert,load` works); blank lines and `#` comments skipped; a header line that is not
/// a number is skipped too.
Status readNumbers(const std::string& path, bool lastOnly, std::vector<double>* out,
                   std::string* error) {
  std::ifstream in(path);
  if (!in) return fail(error, "cannot read " + path);
  std::string line;
  int lineNo = 0;
  while (std::getline(in, line)) {
    ++lineNo;
    if (const size_t h = line.find('#'); h != std::string::npos) line.resize(h);
    std::vector<std::string> fields;
    std::stringstream ss(line);
    std::string f;
    while (std::getline(ss, f, ',')) {
      const size_t a = f.find_first_not_of(" \t\r"), b = f.find_last_not_of(" \t\r");
      if (a != std::string::npos) fields.push_back(f.substr(a, b - a + 1));
    }
    if (fields.empty()) continue;
    if (lastOnly && fields.size() > 1) fields.erase(fields.begin(), fields.end() - 1);
    for (const std::string& x : fields) {
      double v = 0;
      if (!number(x, &v)) {
        if (lineNo == 1 && out->empty()) break;  // a header
        return fail(error, path + ":" + std::to_string(lineNo) + ": '" + x + "' is not a number");
      }
      out->push_back(v);
    }
  }
  if (out->empty()) return fail(error, path + " holds no numbers");
  return Status::Success;
}

}  // namespace

Status parseDistribution(const std::string& text, Distribution* out, std::string* error) {
  Distribution d;
  if (text == "uniform") {
    *out = d;
    return Status::Success;
  }
  if (text.rfind("zipf:", 0) == 0) {
    d.kind = Distribution::Kind::Zipf;
    if (!number(text.substr(5), &d.s) || d.s < 0)
      return fail(error, "zipf:S needs a number S >= 0, not '" + text.substr(5) + "'");
    *out = d;
    return Status::Success;
  }
  if (text.rfind("hot:", 0) == 0) {
    d.kind = Distribution::Kind::Hot;
    const std::string rest = text.substr(4);
    const size_t c = rest.find(':');
    double n = 1;
    if (!number(rest.substr(0, c), &d.factor) || d.factor <= 0 ||
        (c != std::string::npos && (!number(rest.substr(c + 1), &n) || n < 1 || n != std::floor(n))))
      return fail(error, "hot:F[:N] needs F > 0 and a whole N >= 1, not '" + rest + "'");
    d.hotExperts = static_cast<int>(n);
    *out = d;
    return Status::Success;
  }
  d.kind = Distribution::Kind::Loads;
  std::string why;
  if (readNumbers(text, /*lastOnly=*/true, &d.loads, &why) != Status::Success)
    return fail(error, "--dist '" + text + "' is not uniform, zipf:S, hot:F[:N] or a CSV of "
                       "per-expert loads (" + why + ")");
  *out = std::move(d);
  return Status::Success;
}

std::string distributionName(const Distribution& d) {
  char buf[64];
  switch (d.kind) {
    case Distribution::Kind::Uniform: return "uniform";
    case Distribution::Kind::Zipf: std::snprintf(buf, sizeof buf, "zipf:%g", d.s); return buf;
    case Distribution::Kind::Hot:
      std::snprintf(buf, sizeof buf, "hot:%g:%d", d.factor, d.hotExperts);
      return buf;
    case Distribution::Kind::Loads: return "loads(" + std::to_string(d.loads.size()) + ")";
  }
  return "?";
}

Status parsePlacement(const std::string& text, Placement* placement, std::vector<int>* ranks,
                      std::string* error) {
  if (text == "contiguous") {
    *placement = Placement::Contiguous;
    return Status::Success;
  }
  if (text == "round-robin" || text == "rr" || text == "roundrobin") {
    *placement = Placement::RoundRobin;
    return Status::Success;
  }
  std::vector<double> v;
  std::string why;
  if (readNumbers(text, /*lastOnly=*/false, &v, &why) != Status::Success)
    return fail(error, "--placement '" + text + "' is not contiguous, round-robin or a file of "
                       "ranks (" + why + ")");
  ranks->clear();
  for (double x : v) {
    if (x < 0 || x != std::floor(x)) return fail(error, text + ": ranks are whole numbers >= 0");
    ranks->push_back(static_cast<int>(x));
  }
  *placement = Placement::Explicit;
  return Status::Success;
}

}  // namespace nlccl::moe
