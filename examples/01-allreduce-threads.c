/*
 * All-reduce across ranks that are threads of one process.
 *
 *   01-allreduce-threads [nranks]
 *
 * nlcclCommInitAll makes the communicators; each thread sums its vector with the others' and
 * checks the result.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "nlccl.h"

#define COUNT (1 << 20)

typedef struct {
  nlcclComm_t comm;
  int rank, nranks, ok;
} Rank;

static void* rankMain(void* arg) {
  Rank* r = (Rank*)arg;
  float* buf = malloc(COUNT * sizeof(float));
  for (int i = 0; i < COUNT; ++i) buf[i] = (float)(r->rank + 1);
  /* In place: sendbuff == recvbuff. A NULL stream runs the call to completion here. */
  nlcclResult_t res = nlcclAllReduce(buf, buf, COUNT, nlcclFloat, nlcclSum, r->comm, NULL);
  if (res != nlcclSuccess) {
    fprintf(stderr, "rank %d: %s: %s\n", r->rank, nlcclGetErrorString(res),
            nlcclGetLastError(r->comm));
    r->ok = 0;
  } else {
    float want = (float)r->nranks * (r->nranks + 1) / 2;
    r->ok = buf[0] == want && buf[COUNT - 1] == want;
  }
  free(buf);
  return NULL;
}

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 4;
  if (n <= 0) {
    fprintf(stderr, "usage: %s [nranks > 0]\n", argv[0]);
    return 2;
  }
  nlcclComm_t* comms = malloc(n * sizeof(nlcclComm_t));
  Rank* ranks = malloc(n * sizeof(Rank));
  pthread_t* threads = malloc(n * sizeof(pthread_t));
  if (nlcclCommInitAll(comms, n, NULL) != nlcclSuccess) {
    fprintf(stderr, "init failed: %s\n", nlcclGetLastError(NULL));
    return 1;
  }
  for (int r = 0; r < n; ++r) {
    ranks[r] = (Rank){comms[r], r, n, 0};
    pthread_create(&threads[r], NULL, rankMain, &ranks[r]);
  }
  int ok = 1;
  for (int r = 0; r < n; ++r) {
    pthread_join(threads[r], NULL);
    ok = ok && ranks[r].ok;
    nlcclCommDestroy(comms[r]);
  }
  printf("all-reduce of %d floats over %d thread ranks: %s\n", COUNT, n, ok ? "correct" : "WRONG");
  free(comms);
  free(ranks);
  free(threads);
  return ok ? 0 : 1;
}
