// Code in the style of frameworks that use NCCL's newer API (C++): version checks with
// NCCL_VERSION, a non-blocking config with NCCL-only fields, polling ncclCommGetAsyncError while
// init is in progress, ncclCommSplit, a PreMulSum operator (gradient averaging) and
// ncclCommShrink to go on without a rank.
#include <thread>
#include <vector>

#include "common.h"

#if NCCL_VERSION_CODE < NCCL_VERSION(2, 19, 0)
#error "this program needs the NCCL 2.19+ API"
#endif

static const int kRanks = 4;

static void waitInit(ncclComm_t comm) {
  ncclResult_t state = ncclInProgress;
  while (state == ncclInProgress) NCCLCHECK(ncclCommGetAsyncError(comm, &state));
  NCCLCHECK(state);
}

int main() {
  ncclUniqueId id;
  NCCLCHECK(ncclGetUniqueId(&id));
  std::vector<int> wrong(kRanks, 0);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < kRanks; ++rank)
    threads.emplace_back([&, rank] {
      ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
      config.blocking = 0;
      config.splitShare = 1;
      config.cgaClusterSize = 2;
      config.minCTAs = 4;
      config.maxCTAs = 16;
      config.netName = "Socket";
      config.commName = "trainer";
      config.CTAPolicy = NCCL_CTA_POLICY_DEFAULT;
      ncclComm_t world = NCCL_COMM_NULL;
      ncclResult_t res = ncclCommInitRankConfig(&world, kRanks, id, rank, &config);
      if (res != ncclSuccess && res != ncclInProgress) NCCLCHECK(res);
      waitInit(world);

      // Gradient averaging with a pre-multiplied sum: each rank scales by 1/kRanks.
      float scale = 1.0f / kRanks;
      ncclRedOp_t average;
      NCCLCHECK(ncclRedOpCreatePreMulSum(&average, &scale, ncclFloat, ncclScalarHostImmediate, world));
      std::vector<float> grad(4096, static_cast<float>(rank + 1)), out(4096);
      NCCLCHECK(ncclAllReduce(grad.data(), out.data(), grad.size(), ncclFloat, average, world, nullptr));
      NCCLCHECK(ncclRedOpDestroy(average, world));
      for (float v : out) wrong[rank] += v != 2.5f;  // (1+2+3+4)/4

      // Data-parallel groups of two.
      ncclComm_t pair;
      NCCLCHECK(ncclCommSplit(world, rank / 2, rank, &pair, nullptr));
      int one = 1, two = 0;
      NCCLCHECK(ncclAllReduce(&one, &two, 1, ncclInt, ncclSum, pair, nullptr));
      wrong[rank] += two != 2;

      // Rank 3 leaves: the others shrink the world communicator without it.
      if (rank != 3) {
        int excluded[] = {3};
        ncclComm_t three;
        NCCLCHECK(ncclCommShrink(world, excluded, 1, &three, nullptr, NCCL_SHRINK_DEFAULT));
        int n = 0, dev = -1;
        NCCLCHECK(ncclCommCount(three, &n));
        NCCLCHECK(ncclCommCuDevice(three, &dev));
        wrong[rank] += n != 3 || dev != rank;
        NCCLCHECK(ncclCommDestroy(three));
      }
      NCCLCHECK(ncclCommDestroy(pair));
      NCCLCHECK(ncclCommFinalize(world));
      NCCLCHECK(ncclCommDestroy(world));
    });
  int bad = 0;
  for (int r = 0; r < kRanks; ++r) {
    threads[r].join();
    bad += wrong[r];
  }
  printf("Success %s\n", bad ? "(but wrong results)" : "");
  return bad ? 1 : 0;
}
