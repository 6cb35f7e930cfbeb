/* The public header must compile as C99 on its own, NCCL-parity additions included. */
#include "nlccl.h"

#if NLCCL_VERSION_CODE < NLCCL_VERSION(2, 19, 0)
#error "NLCCL_VERSION must compare as NCCL's does"
#endif

int nlcclHeaderCompilesAsC(void) {
  nlcclConfig_t config = NLCCL_CONFIG_INITIALIZER;
  nlcclUniqueId id;
  nlcclComm_t comm = NLCCL_COMM_NULL;
  nlcclWindow_t win = NULL;
  nlcclParamHandle_t param = NULL;
  nlcclRedOp_t op = nlcclMaxRedOp;
  nlcclScalarResidence_t where = nlcclScalarHostImmediate;
  nlcclCommMemStat_t stat = nlcclStatGpuMemTotal;
  (void)id;
  (void)comm;
  (void)win;
  (void)param;
  config.splitShare = 1;
  config.CTAPolicy = NLCCL_CTA_POLICY_DEFAULT;
  config.netName = "Socket";
  return (int)config.size + (int)nlcclFloat8e5m2 + (int)nlcclAvg + (int)nlcclTimeout +
         (op == nlcclMaxRedOp) + (int)where + (int)stat + nlcclUnhandledCudaError +
         NLCCL_WIN_COLL_SYMMETRIC + NLCCL_SHRINK_ABORT;
}
