/*
 * nlccl: collective communication for AWS Trainium NeuronLink fabrics.
 *
 * The API is nccl.h with the prefix `nlccl`: names, argument order and enum values are NCCL's, so
 * code written for NCCL ports by renaming. `cudaStream_t` becomes `nlcclStream_t`; buffers are host
 * memory. This header compiles as C99 and as C++.
 */
#ifndef NLCCL_H_
#define NLCCL_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NLCCL_MAJOR 0
#define NLCCL_MINOR 1
#define NLCCL_PATCH 0
/** Version code as returned by nlcclGetVersion (NCCL's encoding: major*10000 + minor*100 + patch). */
#define NLCCL_VERSION_CODE (NLCCL_MAJOR * 10000 + NLCCL_MINOR * 100 + NLCCL_PATCH)

/** Opaque communicator handle. */
typedef struct nlcclComm* nlcclComm_t;
/** Opaque in-order work queue (the host counterpart of cudaStream_t). NULL runs calls inline. */
typedef struct nlcclStream* nlcclStream_t;

#define NLCCL_UNIQUE_ID_BYTES 128
/** Rendezvous token made by nlcclGetUniqueId on one rank and handed to all others. */
typedef struct {
  char internal[NLCCL_UNIQUE_ID_BYTES];
} nlcclUniqueId;

/** Result codes (values are NCCL's). */
typedef enum {
  nlcclSuccess = 0,
  nlcclUnhandledDeviceError = 1,
  nlcclSystemError = 2,
  nlcclInternalError = 3,
  nlcclInvalidArgument = 4,
  nlcclInvalidUsage = 5,
  nlcclRemoteError = 6,
  nlcclInProgress = 7,
  nlcclTimeout = 8,
  nlcclNumResults = 9
} nlcclResult_t;

/** Element types (values are NCCL's). */
typedef enum {
  nlcclInt8 = 0,
  nlcclChar = 0,
  nlcclUint8 = 1,
  nlcclInt32 = 2,
  nlcclInt = 2,
  nlcclUint32 = 3,
  nlcclInt64 = 4,
  nlcclUint64 = 5,
  nlcclFloat16 = 6,
  nlcclHalf = 6,
  nlcclFloat32 = 7,
  nlcclFloat = 7,
  nlcclFloat64 = 8,
  nlcclDouble = 8,
  nlcclBfloat16 = 9,
  nlcclFloat8e4m3 = 10,
  nlcclFloat8e5m2 = 11,
  nlcclNumTypes = 12
} nlcclDataType_t;

/** Reduction operators (values are NCCL's). Avg sums, then divides once by the rank count. */
typedef enum {
  nlcclSum = 0,
  nlcclProd = 1,
  nlcclMax = 2,
  nlcclMin = 3,
  nlcclAvg = 4,
  nlcclNumOps = 5
} nlcclRedOp_t;

/** Value of an int config field that was not set (the library then uses its default). */
#define NLCCL_CONFIG_UNDEF_INT INT32_MIN
/** Value of a string config field that was not set. */
#define NLCCL_CONFIG_UNDEF_PTR NULL

/**
 * Communicator options. Always start from NLCCL_CONFIG_INITIALIZER: the header lets later versions
 * add fields without breaking binaries built against this one.
 */
typedef struct {
  size_t size;          /**< sizeof(nlcclConfig_t), set by the initializer */
  unsigned int magic;   /**< NLCCL_CONFIG_MAGIC, set by the initializer */
  unsigned int version; /**< NLCCL_VERSION_CODE, set by the initializer */
  int blocking;         /**< 1 (default) or 0; init always completes before returning, which
                             NCCL's non-blocking mode also allows (it then returns Success) */
  int timeoutMs;        /**< wait limit for any peer; default NLCCL_TIMEOUT_MS or 300000 */
  const char* transport; /**< "auto", "shm", "ofi", "neuronlink", "loopback"; default NLCCL_TRANSPORT */
  const char* topology;  /**< fabric preset or JSON file; default NLCCL_TOPOLOGY or "trn3-us144" */
  const char* algorithm; /**< per-collective choice, e.g. "allreduce:tree,alltoall:hier" */
  const char* commName;  /**< name used in log lines */
} nlcclConfig_t;

#define NLCCL_CONFIG_MAGIC 0x6e6c6363u /* "nlcc" */

#define NLCCL_CONFIG_INITIALIZER                                                              \
  {                                                                                           \
    sizeof(nlcclConfig_t), NLCCL_CONFIG_MAGIC, NLCCL_VERSION_CODE, NLCCL_CONFIG_UNDEF_INT,    \
        NLCCL_CONFIG_UNDEF_INT, NLCCL_CONFIG_UNDEF_PTR, NLCCL_CONFIG_UNDEF_PTR,               \
        NLCCL_CONFIG_UNDEF_PTR, NLCCL_CONFIG_UNDEF_PTR                                        \
  }

/* ---- version and errors ---- */
/** Writes NLCCL_VERSION_CODE. */
nlcclResult_t nlcclGetVersion(int* version);
/** A static description of a result code. */
const char* nlcclGetErrorString(nlcclResult_t result);
/** The message of the last error on `comm` (or of the last error without a communicator if NULL). */
const char* nlcclGetLastError(nlcclComm_t comm);

/* ---- ids and init ---- */
/** Opens the bootstrap listener and writes its address and secret into `uniqueId`. */
nlcclResult_t nlcclGetUniqueId(nlcclUniqueId* uniqueId);
/** Joins communicator `commId` as `rank` of `nranks` (one call per process or thread). */
nlcclResult_t nlcclCommInitRank(nlcclComm_t* comm, int nranks, nlcclUniqueId commId, int rank);
/** As nlcclCommInitRank, with options. */
nlcclResult_t nlcclCommInitRankConfig(nlcclComm_t* comm, int nranks, nlcclUniqueId commId, int rank,
                                      nlcclConfig_t* config);
/** Makes `ndev` ranks in this process, as threads sharing memory (devlist is ignored; may be NULL). */
nlcclResult_t nlcclCommInitAll(nlcclComm_t* comms, int ndev, const int* devlist);
/** Color for nlcclCommSplit of a rank that joins no new communicator. */
#define NLCCL_SPLIT_NOCOLOR -1
/** Splits `comm` by `color` (ranks ordered by `key`); NLCCL_SPLIT_NOCOLOR (any color < 0) yields
 *  *newcomm = NULL. Collective over `comm`. */
nlcclResult_t nlcclCommSplit(nlcclComm_t comm, int color, int key, nlcclComm_t* newcomm,
                             nlcclConfig_t* config);

/* ---- lifetime ---- */
/** Waits until every call queued on streams for `comm` has run; returns its async error. */
nlcclResult_t nlcclCommFinalize(nlcclComm_t comm);
/** Waits for work queued on `comm` (as finalize does), then frees it. */
nlcclResult_t nlcclCommDestroy(nlcclComm_t comm);
/** Stops `comm` at once: pending operations fail, resources are freed. Always returns promptly. */
nlcclResult_t nlcclCommAbort(nlcclComm_t comm);
/** The first error met by work run asynchronously on `comm`, or nlcclSuccess. */
nlcclResult_t nlcclCommGetAsyncError(nlcclComm_t comm, nlcclResult_t* asyncError);

/* ---- queries ---- */
nlcclResult_t nlcclCommCount(const nlcclComm_t comm, int* count);
nlcclResult_t nlcclCommUserRank(const nlcclComm_t comm, int* rank);

/** What the last collective on a communicator did on the calling rank. */
typedef struct {
  size_t size;              /**< set to sizeof(nlcclCommStats_t) before the call */
  double lastModelledUs;    /**< modelled time of the last collective on this rank: from its
                                 start to this rank's finish, on the fabric model of the
                                 neuronlink transport (0 with other transports) */
  double clockUs;           /**< this rank's virtual clock (neuronlink), after the last collective */
  uint64_t lastBytesSent;   /**< bytes this rank sent in the last collective */
  uint64_t collectives;     /**< collectives completed on this communicator */
  char lastAlgorithm[16];   /**< algorithm of the last collective ("ring", "tree", ...) */
  char transport[16];       /**< "loopback", "shm", "neuronlink", ... */
} nlcclCommStats_t;

/** Fills `stats` (whose size field the caller sets) for the calling rank. */
nlcclResult_t nlcclCommGetStats(const nlcclComm_t comm, nlcclCommStats_t* stats);

/* ---- collectives (counts are in elements) ---- */
nlcclResult_t nlcclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                             nlcclDataType_t datatype, nlcclRedOp_t op, nlcclComm_t comm,
                             nlcclStream_t stream);
nlcclResult_t nlcclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                             nlcclDataType_t datatype, int root, nlcclComm_t comm,
                             nlcclStream_t stream);
nlcclResult_t nlcclReduce(const void* sendbuff, void* recvbuff, size_t count,
                          nlcclDataType_t datatype, nlcclRedOp_t op, int root, nlcclComm_t comm,
                          nlcclStream_t stream);
/** recvbuff holds nranks*sendcount elements; in place when sendbuff == recvbuff + rank*sendcount. */
nlcclResult_t nlcclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                             nlcclDataType_t datatype, nlcclComm_t comm, nlcclStream_t stream);
/** sendbuff holds nranks*recvcount elements; in place when recvbuff == sendbuff + rank*recvcount. */
nlcclResult_t nlcclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                 nlcclDataType_t datatype, nlcclRedOp_t op, nlcclComm_t comm,
                                 nlcclStream_t stream);
/** `count` elements to and from each peer; both buffers hold nranks*count elements. */
nlcclResult_t nlcclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                            nlcclDataType_t datatype, nlcclComm_t comm, nlcclStream_t stream);
/** Per-peer counts and displacements, in elements. */
nlcclResult_t nlcclAlltoAllv(const void* sendbuff, const size_t sendcounts[], const size_t sdispls[],
                             void* recvbuff, const size_t recvcounts[], const size_t rdispls[],
                             nlcclDataType_t datatype, nlcclComm_t comm, nlcclStream_t stream);

/* ---- point-to-point ---- */
nlcclResult_t nlcclSend(const void* sendbuff, size_t count, nlcclDataType_t datatype, int peer,
                        nlcclComm_t comm, nlcclStream_t stream);
nlcclResult_t nlcclRecv(void* recvbuff, size_t count, nlcclDataType_t datatype, int peer,
                        nlcclComm_t comm, nlcclStream_t stream);
/** Calls between GroupStart and GroupEnd are issued together at GroupEnd (they never deadlock). */
nlcclResult_t nlcclGroupStart(void);
nlcclResult_t nlcclGroupEnd(void);

/* ---- streams ---- */
nlcclResult_t nlcclStreamCreate(nlcclStream_t* stream);
/** Waits until all work queued on `stream` has run; returns the first error it met. */
nlcclResult_t nlcclStreamSynchronize(nlcclStream_t stream);
/** nlcclSuccess when `stream` is idle, nlcclInProgress while work is queued, or the error met. */
nlcclResult_t nlcclStreamQuery(nlcclStream_t stream);
nlcclResult_t nlcclStreamDestroy(nlcclStream_t stream);

/* ---- memory ---- */
/** Allocates `size` bytes in shared memory that same-host peers can read directly. */
nlcclResult_t nlcclMemAlloc(void** ptr, size_t size);
nlcclResult_t nlcclMemFree(void* ptr);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // NLCCL_H_
