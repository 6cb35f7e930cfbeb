/* A user's program: links the installed nlccl and runs a one-rank all-reduce. */
#include <stdio.h>
#include "nlccl.h"
int main(void) {
  nlcclComm_t comm;
  float x = 21.0f, y = 0.0f;
  if (nlcclCommInitAll(&comm, 1, NULL) != nlcclSuccess) return 1;
  if (nlcclAllReduce(&x, &y, 1, nlcclFloat, nlcclSum, comm, NULL) != nlcclSuccess) return 1;
  printf("consumer: %g\n", y * 2);
  return nlcclCommDestroy(comm) == nlcclSuccess && y == 21.0f ? 0 : 1;
}
