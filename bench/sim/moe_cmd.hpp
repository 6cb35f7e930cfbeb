// nlccl-sim moe: MoE dispatch and combine on the fabric model (moe_cmd.cpp).
#pragma once

namespace nlccl::simtool {

/// Runs `nlccl-sim moe ...` (argv[0] is "moe"); `argv0` is nlccl-sim's own path (to find the
/// heat map script installed beside it). Returns the exit code.
int moeMain(int argc, char** argv, const char* argv0);

}  // namespace nlccl::simtool
