/* The public header must compile as C99 on its own. */
#include "nlccl.h"

int nlcclHeaderCompilesAsC(void) {
  nlcclConfig_t config = NLCCL_CONFIG_INITIALIZER;
  nlcclUniqueId id;
  (void)id;
  return (int)config.size + (int)nlcclFloat8e5m2 + (int)nlcclAvg + (int)nlcclTimeout;
}
