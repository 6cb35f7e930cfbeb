// Every environment parameter nlccl reads is documented in the README.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "core/params.hpp"

#ifndef NLCCL_SOURCE_DIR
#error "NLCCL_SOURCE_DIR must be defined"
#endif

TEST(ParamsDocTest, EveryParameterIsInTheReadme) {
  std::ifstream f(NLCCL_SOURCE_DIR "/README.md");
  ASSERT_TRUE(f.good());
  std::stringstream ss;
  ss << f.rdbuf();
  std::string readme = ss.str();
  auto params = nlccl::core::allParams();
  ASSERT_GT(params.size(), 3u);
  for (const auto& p : params)
    EXPECT_NE(readme.find(std::string("`") + p.env + "`"), std::string::npos)
        << p.env << " (" << p.doc << ") is not documented in README.md";
  for (const char* v : {"NLCCL_DEBUG", "NLCCL_DEBUG_SUBSYS", "NLCCL_DEBUG_FILE"})
    EXPECT_NE(readme.find(v), std::string::npos) << v;
}
