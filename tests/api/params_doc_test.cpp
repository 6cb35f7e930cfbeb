// Every environment parameter nlccl reads is documented in the README.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "util/params.hpp"

#ifndef NLCCL_SOURCE_DIR
#error "NLCCL_SOURCE_DIR must be defined"
#endif

TEST(ParamsDocTest, EveryParameterIsInTheReadme) {
  std::ifstream f(NLCCL_SOURCE_DIR "/README.md");
  ASSERT_TRUE(f.good());
  std::stringstream ss;
  ss << f.rdbuf();
  std::string readme = ss.str();
  auto params = nlccl::allParams();
  ASSERT_GT(params.size(), 3u);
  for (const auto& p : params)
    EXPECT_NE(readme.find(std::string("`") + p.env + "`"), std::string::npos)
        << p.env << " (" << p.doc << ") is not documented in README.md";
  for (const char* v : {"NLCCL_DEBUG", "NLCCL_DEBUG_SUBSYS", "NLCCL_DEBUG_FILE"})
    EXPECT_NE(readme.find(v), std::string::npos) << v;
}

// Nothing reads the environment behind params.def's back: every getenv in the library's sources
// is in util/params.cpp (nlccl-perf's check for an MPI launcher reads the launcher's variables).
TEST(ParamsDocTest, NoGetenvOutsideTheParameterTable) {
  namespace fs = std::filesystem;
  const fs::path root(NLCCL_SOURCE_DIR);
  const std::set<std::string> allowed = {"src/util/params.cpp", "bench/perf/main.cpp"};
  int scanned = 0;
  for (const char* dir : {"src", "transports", "algorithms", "bench"})
    for (const auto& e : fs::recursive_directory_iterator(root / dir)) {
      const std::string ext = e.path().extension().string();
      if (!e.is_regular_file() || (ext != ".cpp" && ext != ".hpp")) continue;
      ++scanned;
      std::ifstream in(e.path());
      std::stringstream text;
      text << in.rdbuf();
      const std::string rel = fs::relative(e.path(), root).string();
      if (allowed.count(rel)) continue;
      EXPECT_EQ(text.str().find("getenv("), std::string::npos)
          << rel << " reads the environment; declare the variable in src/util/params.def";
    }
  EXPECT_GT(scanned, 50);
}
