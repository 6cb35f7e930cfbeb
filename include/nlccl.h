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

/*
 * Version. nlccl implements the API of NCCL 2.30, and its version macros say so, as NCCL's own
 * would: ported code that tests `NLCCL_VERSION_CODE >= NLCCL_VERSION(2,19,0)` (after the rename
 * of `NCCL_VERSION_CODE >= NCCL_VERSION(2,19,0)`) takes the modern path. nlccl's own release is
 * NLCCL_RELEASE_MAJOR/MINOR/PATCH.
 */
#define NLCCL_MAJOR 2
#define NLCCL_MINOR 30
#define NLCCL_PATCH 0
#define NLCCL_SUFFIX ""
#define NLCCL_RELEASE_MAJOR 0
#define NLCCL_RELEASE_MINOR 1
#define NLCCL_RELEASE_PATCH 0
/** NCCL's encoding of a version (the old one below 2.9, as NCCL's macro). */
#define NLCCL_VERSION(X, Y, Z) \
  (((X) <= 2 && (Y) <= 8) ? (X) * 1000 + (Y) * 100 + (Z) : (X) * 10000 + (Y) * 100 + (Z))
/** Version code as returned by nlcclGetVersion (the NCCL API level: 23000). */
#define NLCCL_VERSION_CODE NLCCL_VERSION(NLCCL_MAJOR, NLCCL_MINOR, NLCCL_PATCH)

/** Opaque communicator handle. */
typedef struct nlcclComm* nlcclComm_t;
#define NLCCL_COMM_NULL NULL
/** Opaque in-order work queue (the host counterpart of cudaStream_t). NULL runs calls inline. */
typedef struct nlcclStream* nlcclStream_t;
/** A registered memory window (nlcclCommWindowRegister). */
typedef struct nlcclWindow_vidmem* nlcclWindow_t;

#define NLCCL_UNIQUE_ID_BYTES 128
/** Rendezvous token made by nlcclGetUniqueId on one rank and handed to all others. */
typedef struct {
  char internal[NLCCL_UNIQUE_ID_BYTES];
} nlcclUniqueId;

/** Result codes (values are NCCL's). */
typedef enum {
  nlcclSuccess = 0,
  nlcclUnhandledDeviceError = 1,
  nlcclUnhandledCudaError = 1, /**< NCCL's name of the device error */
  nlcclSystemError = 2,
  nlcclInternalError = 3,
  nlcclInvalidArgument = 4,
  nlcclInvalidUsage = 5,
  nlcclRemoteError = 6,
  nlcclInProgress = 7,
  nlcclTimeout = 8,
  nlcclNumResults = 9
} nlcclResult_t;

/** Value of an int config field that was not set (the library then uses its default). */
#define NLCCL_CONFIG_UNDEF_INT INT32_MIN
/** Value of a pointer config field that was not set. */
#define NLCCL_CONFIG_UNDEF_PTR NULL
/** Color for nlcclCommSplit of a rank that joins no new communicator. */
#define NLCCL_SPLIT_NOCOLOR -1
#define NLCCL_UNDEF_FLOAT -1.0f
/** Magic of NLCCL_CONFIG_INITIALIZER (NCCL's value). */
#define NLCCL_API_MAGIC 0xcafebeefu
#define NLCCL_CONFIG_MAGIC NLCCL_API_MAGIC

/* Window registration flags (NCCL's values). On a host every flag is accepted; see
 * nlcclCommWindowRegister. */
#define NLCCL_WIN_DEFAULT 0x00
#define NLCCL_WIN_COLL_SYMMETRIC 0x01
#define NLCCL_WIN_STRICT_ORDERING 0x02
#define NLCCL_WIN_GIN_ONLY 0x04
#define NLCCL_WIN_REQUIRED_ALIGNMENT 4096

/* CTA policies (accepted in nlcclConfig_t.CTAPolicy and ignored: there are no CTAs on a host). */
#define NLCCL_CTA_POLICY_DEFAULT 0x00
#define NLCCL_CTA_POLICY_EFFICIENCY 0x01
#define NLCCL_CTA_POLICY_ZERO 0x02

/* nlcclCommShrink flags */
#define NLCCL_SHRINK_DEFAULT 0x00 /**< shrink a healthy communicator */
#define NLCCL_SHRINK_ABORT 0x01   /**< first stop the parent's pending work (a peer has died) */

/* nlcclCommRevoke flags */
#define NLCCL_REVOKE_DEFAULT 0x00

/* nlcclCommSuspend flags */
#define NLCCL_SUSPEND_MEM 0x01

/* NCCL's host modes, accepted in nlcclConfig_t and ignored (no NVLink SHARP or copy engines). */
typedef enum {
  nlcclHostCftDefault = NLCCL_CONFIG_UNDEF_INT,
  nlcclHostCftEnable = 1,
  nlcclHostCftDisable = 2,
  nlcclHostCftFallback = 3
} nlcclHostCftMode_t;
typedef enum {
  nlcclNvlsHostModeDefault = NLCCL_CONFIG_UNDEF_INT,
  nlcclNvlsHostModeEnable = 0,
  nlcclNvlsHostModeDisableTransport = 1 << 0,
  nlcclNvlsHostModeDisableSymmetricMultimem = 1 << 1,
  nlcclNvlsHostModeDisable = INT32_MAX
} nlcclNvlsHostMode_t;

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

/** Reduction operators (values are NCCL's). Avg sums, then divides once by the rank count.
 *  Operators made by nlcclRedOpCreatePreMulSum take values from nlcclNumOps up. */
typedef enum { nlcclNumOps_dummy = 5 } nlcclRedOp_dummy_t;
typedef enum {
  nlcclSum = 0,
  nlcclProd = 1,
  nlcclMax = 2,
  nlcclMin = 3,
  nlcclAvg = 4,
  nlcclNumOps = 5, /**< built-in operators; also the first value of a created one */
  /** The largest valid nlcclRedOp_t (NCCL's definition). */
  nlcclMaxRedOp = 0x7fffffff >> (32 - 8 * sizeof(nlcclRedOp_dummy_t))
} nlcclRedOp_t;

/** Where the scalar of nlcclRedOpCreatePreMulSum lives (NCCL's values). Buffers are host memory
 *  here, so both are host pointers: Device is read when the collective runs, HostImmediate
 *  before nlcclRedOpCreatePreMulSum returns. */
typedef enum {
  nlcclScalarDevice = 0,
  nlcclScalarHostImmediate = 1
} nlcclScalarResidence_t;

/**
 * Communicator options. Always start from NLCCL_CONFIG_INITIALIZER: the header lets later versions
 * add fields without breaking binaries built against this one. The fields up to nvlsHostMode are
 * NCCL's ncclConfig_t, by name and in NCCL's order (so ported code that sets any of them
 * compiles); those with no meaning on a host are accepted (range-checked as NCCL does where it
 * matters) and ignored: cgaClusterSize, minCTAs, maxCTAs, netName, trafficClass, collnetEnable,
 * CTAPolicy, nvlsCTAs, nChannelsPerNetPeer, nvlinkCentricSched, graphUsageMode, numRmaCtx,
 * maxP2pPeers, graphStreamOrdering, launchOrderImplicit, numRmaSig, rmaEagerInit, hostCftMode,
 * nvlsHostMode; splitShare and shrinkShare are accepted and ignored too (a split or shrunk
 * communicator always gets fresh resources). nlccl's own fields follow.
 */
typedef struct {
  size_t size;           /**< sizeof(nlcclConfig_t), set by the initializer */
  unsigned int magic;    /**< NLCCL_API_MAGIC, set by the initializer */
  unsigned int version;  /**< NLCCL_VERSION_CODE, set by the initializer */
  int blocking;          /**< 1 (default) or 0; init always completes before returning, which
                              NCCL's non-blocking mode also allows (it then returns Success) */
  int cgaClusterSize;    /**< ignored (no CUDA thread-block clusters) */
  int minCTAs;           /**< ignored */
  int maxCTAs;           /**< ignored */
  const char* netName;   /**< ignored (the transport is chosen per pair of ranks, see transport) */
  int splitShare;        /**< 0 or 1; ignored */
  int trafficClass;      /**< ignored */
  const char* commName;  /**< name used in log lines */
  int collnetEnable;     /**< ignored (no CollNet) */
  int CTAPolicy;         /**< NLCCL_CTA_POLICY_*; ignored */
  int shrinkShare;       /**< 0 or 1; ignored */
  int nvlsCTAs;          /**< ignored (no NVLink SHARP) */
  int nChannelsPerNetPeer; /**< ignored */
  int nvlinkCentricSched;  /**< ignored */
  int graphUsageMode;      /**< ignored (no CUDA graphs) */
  int numRmaCtx;           /**< ignored */
  int maxP2pPeers;         /**< ignored */
  int graphStreamOrdering; /**< ignored */
  int launchOrderImplicit; /**< ignored (calls on a stream always run in order) */
  int numRmaSig;           /**< ignored */
  int rmaEagerInit;        /**< ignored */
  int hostCftMode;         /**< nlcclHostCftMode_t; ignored */
  int nvlsHostMode;        /**< nlcclNvlsHostMode_t; ignored */
  /* ---- nlccl's own fields ---- */
  int timeoutMs;          /**< wait limit for any peer; default NLCCL_TIMEOUT_MS or 300000 */
  const char* transport;  /**< "auto", "shm", "loopback", "neuronlink"; default NLCCL_TRANSPORT */
  const char* topology;   /**< fabric preset or JSON file; default NLCCL_TOPOLOGY or "trn3-us144" */
  const char* algorithm;  /**< per-collective choice, e.g. "allreduce:tree,alltoall:hier" */
} nlcclConfig_t;

#define NLCCL_CONFIG_INITIALIZER                                                             \
  {                                                                                          \
    sizeof(nlcclConfig_t), NLCCL_API_MAGIC, NLCCL_VERSION_CODE,                              \
        NLCCL_CONFIG_UNDEF_INT,   /* blocking */                                             \
        NLCCL_CONFIG_UNDEF_INT,   /* cgaClusterSize */                                       \
        NLCCL_CONFIG_UNDEF_INT,   /* minCTAs */                                              \
        NLCCL_CONFIG_UNDEF_INT,   /* maxCTAs */                                              \
        NLCCL_CONFIG_UNDEF_PTR,   /* netName */                                              \
        NLCCL_CONFIG_UNDEF_INT,   /* splitShare */                                           \
        NLCCL_CONFIG_UNDEF_INT,   /* trafficClass */                                         \
        NLCCL_CONFIG_UNDEF_PTR,   /* commName */                                             \
        NLCCL_CONFIG_UNDEF_INT,   /* collnetEnable */                                        \
        NLCCL_CONFIG_UNDEF_INT,   /* CTAPolicy */                                            \
        NLCCL_CONFIG_UNDEF_INT,   /* shrinkShare */                                          \
        NLCCL_CONFIG_UNDEF_INT,   /* nvlsCTAs */                                             \
        NLCCL_CONFIG_UNDEF_INT,   /* nChannelsPerNetPeer */                                  \
        NLCCL_CONFIG_UNDEF_INT,   /* nvlinkCentricSched */                                   \
        NLCCL_CONFIG_UNDEF_INT,   /* graphUsageMode */                                       \
        NLCCL_CONFIG_UNDEF_INT,   /* numRmaCtx */                                            \
        NLCCL_CONFIG_UNDEF_INT,   /* maxP2pPeers */                                          \
        NLCCL_CONFIG_UNDEF_INT,   /* graphStreamOrdering */                                  \
        NLCCL_CONFIG_UNDEF_INT,   /* launchOrderImplicit */                                  \
        NLCCL_CONFIG_UNDEF_INT,   /* numRmaSig */                                            \
        NLCCL_CONFIG_UNDEF_INT,   /* rmaEagerInit */                                         \
        NLCCL_CONFIG_UNDEF_INT,   /* hostCftMode */                                          \
        NLCCL_CONFIG_UNDEF_INT,   /* nvlsHostMode */                                         \
        NLCCL_CONFIG_UNDEF_INT,   /* timeoutMs */                                            \
        NLCCL_CONFIG_UNDEF_PTR,   /* transport */                                            \
        NLCCL_CONFIG_UNDEF_PTR,   /* topology */                                             \
        NLCCL_CONFIG_UNDEF_PTR    /* algorithm */                                            \
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
/** Splits `comm` by `color` (ranks ordered by `key`); NLCCL_SPLIT_NOCOLOR (any color < 0) yields
 *  *newcomm = NULL. Collective over `comm`. */
nlcclResult_t nlcclCommSplit(nlcclComm_t comm, int color, int key, nlcclComm_t* newcomm,
                             nlcclConfig_t* config);
/** A new communicator of the ranks of `comm` that are not in excludeRanksList, in their old
 *  order. Called by every rank that is not excluded, with the same list; excluded ranks do not
 *  call it (they may be dead). NLCCL_SHRINK_ABORT first fails `comm`'s pending work (use it after
 *  a peer died); `comm` itself stays to be destroyed. config NULL: `comm`'s configuration. */
nlcclResult_t nlcclCommShrink(nlcclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                              nlcclComm_t* newcomm, nlcclConfig_t* config, int shrinkFlags);
/** A unique id for growing `comm` with nlcclCommGrow (one rank of `comm` calls it, then hands
 *  the id to the new ranks). A second call before the grow that consumes it is InvalidUsage. */
nlcclResult_t nlcclCommGetUniqueId(nlcclComm_t comm, nlcclUniqueId* uniqueId);
/** A communicator of nRanks: the ranks of `comm` (keeping their ranks; comm's rank that made the
 *  id passes it, the others NULL, all with rank -1) and new ranks (comm NULL, the id, rank in
 *  [comm's size, nRanks)). Collective over all of them. */
nlcclResult_t nlcclCommGrow(nlcclComm_t comm, int nRanks, const nlcclUniqueId* uniqueId, int rank,
                            nlcclComm_t* newcomm, nlcclConfig_t* config);
/** As nlcclCommInitRankConfig with nId ids (the same array on every rank). NCCL spreads the
 *  bootstrap over them; nlccl's bootstrap needs one root, and uses commIds[0]. */
nlcclResult_t nlcclCommInitRankScalable(nlcclComm_t* newcomm, int nranks, int myrank, int nId,
                                        nlcclUniqueId* commIds, nlcclConfig_t* config);

/* ---- lifetime ---- */
/** Waits until every call queued on streams for `comm` has run; returns its async error. */
nlcclResult_t nlcclCommFinalize(nlcclComm_t comm);
/** Waits for work queued on `comm` (as finalize does), then frees it. */
nlcclResult_t nlcclCommDestroy(nlcclComm_t comm);
/** Stops `comm` at once: pending operations fail, resources are freed. Always returns promptly. */
nlcclResult_t nlcclCommAbort(nlcclComm_t comm);
/** The first error met by work run asynchronously on `comm`, or nlcclSuccess. */
nlcclResult_t nlcclCommGetAsyncError(nlcclComm_t comm, nlcclResult_t* asyncError);
/** Fails the pending work of `comm` (as abort does) but keeps the communicator, so it can still
 *  be shrunk, split or destroyed. revokeFlags must be NLCCL_REVOKE_DEFAULT. */
nlcclResult_t nlcclCommRevoke(nlcclComm_t comm, int revokeFlags);
/** Waits for queued work, then (NLCCL_SUSPEND_MEM) frees the scratch memory kept for reuse;
 *  calls on a suspended communicator are InvalidUsage until nlcclCommResume. */
nlcclResult_t nlcclCommSuspend(nlcclComm_t comm, int flags);
nlcclResult_t nlcclCommResume(nlcclComm_t comm);

/* ---- queries ---- */
nlcclResult_t nlcclCommCount(const nlcclComm_t comm, int* count);
nlcclResult_t nlcclCommUserRank(const nlcclComm_t comm, int* rank);
/** The rank's index among the ranks of `comm` on its host (0, 1, ...): what ported code passes
 *  where NCCL's returns the CUDA device. */
nlcclResult_t nlcclCommCuDevice(const nlcclComm_t comm, int* device);
/** nlccl's own: the transport that carries this rank's messages to `peer` ("shm", "ofi",
 *  "loopback", ...; for the calling rank itself, the one its messages to itself take). The
 *  string is owned by the library and lives as long as the communicator. */
nlcclResult_t nlcclCommPeerTransport(const nlcclComm_t comm, int peer, const char** name);

/** Host memory of a communicator (NCCL's names say GPU; here it is the host's). */
typedef enum {
  nlcclStatGpuMemSuspend = 0,   /**< bytes nlcclCommSuspend would free (scratch kept for reuse) */
  nlcclStatGpuMemSuspended = 1, /**< 1 while suspended, else 0 */
  nlcclStatGpuMemPersist = 2,   /**< bytes that stay (0: transport memory is not counted) */
  nlcclStatGpuMemTotal = 3      /**< the sum of the two */
} nlcclCommMemStat_t;
nlcclResult_t nlcclCommMemStats(nlcclComm_t comm, nlcclCommMemStat_t stat, uint64_t* value);

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
/** Broadcast in place (NCCL's deprecated form): nlcclBroadcast(buff, buff, ...). */
nlcclResult_t nlcclBcast(void* buff, size_t count, nlcclDataType_t datatype, int root,
                         nlcclComm_t comm, nlcclStream_t stream);
/** Every rank sends `count` elements to `root`, which places rank i's at recvbuff + i*count
 *  (recvbuff is not used elsewhere). In place when sendbuff == recvbuff + root*count. */
nlcclResult_t nlcclGather(const void* sendbuff, void* recvbuff, size_t count,
                          nlcclDataType_t datatype, int root, nlcclComm_t comm,
                          nlcclStream_t stream);
/** `root` sends sendbuff + i*count to rank i (sendbuff is not used elsewhere); every rank
 *  receives `count` elements. In place when recvbuff == sendbuff + root*count. */
nlcclResult_t nlcclScatter(const void* sendbuff, void* recvbuff, size_t count,
                           nlcclDataType_t datatype, int root, nlcclComm_t comm,
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

/** What nlcclGroupSimulateEnd reports (NCCL 2.24's ncclSimInfo_t). */
typedef struct nlcclSimInfo_v1 {
  size_t size;          /**< sizeof(nlcclSimInfo_t) */
  unsigned int magic;   /**< NLCCL_SIM_INFO_MAGIC */
  unsigned int version; /**< NLCCL_VERSION_CODE */
  float estimatedTime;  /**< predicted time of the group's collectives, microseconds */
} nlcclSimInfo_v1_t;
typedef nlcclSimInfo_v1_t nlcclSimInfo_t;
#define NLCCL_SIM_INFO_MAGIC 0x74685283u
#define NLCCL_SIM_INFO_INITIALIZER \
  { sizeof(nlcclSimInfo_t), NLCCL_SIM_INFO_MAGIC, NLCCL_VERSION_CODE, NLCCL_UNDEF_FLOAT }
/** Closes the group like nlcclGroupEnd but runs nothing: the grouped calls are dropped and
 *  simInfo->estimatedTime is their predicted time (the simulator's analytical mode on each
 *  communicator's fabric, with the algorithm each call would have used; per communicator the
 *  collectives add up, and the slowest communicator's total is reported). Point-to-point calls
 *  count 0. */
nlcclResult_t nlcclGroupSimulateEnd(nlcclSimInfo_t* simInfo);

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
/** Registers [buff, buff+size) with `comm` and returns a handle for nlcclCommDeregister
 *  (nccl-tests' -R 1). Buffers from nlcclMemAlloc are read by same-host peers directly (one copy)
 *  whether registered or not; other buffers are recorded and take the shared-memory FIFOs. */
nlcclResult_t nlcclCommRegister(const nlcclComm_t comm, void* buff, size_t size, void** handle);
nlcclResult_t nlcclCommDeregister(const nlcclComm_t comm, void* handle);
/** Registers a window [buff, buff+size) (NLCCL_WIN_* flags). Local to the calling rank (NCCL's is
 *  collective, which callers satisfy anyway): nlccl keeps the window for nlcclWinGetUserPtr and
 *  the same single-copy rules as nlcclCommRegister; the one-sided calls on windows
 *  (ncclPutSignal, ...) are not provided. */
nlcclResult_t nlcclCommWindowRegister(nlcclComm_t comm, void* buff, size_t size, nlcclWindow_t* win,
                                      int winFlags);
nlcclResult_t nlcclCommWindowDeregister(nlcclComm_t comm, nlcclWindow_t win);
/** The buff the window was registered with. */
nlcclResult_t nlcclWinGetUserPtr(nlcclComm_t comm, nlcclWindow_t win, void** outUserPtr);

/* ---- custom reduction operators ---- */
/** A reduction operator that multiplies each rank's input by *scalar (of `datatype`) before
 *  summing, for collectives on `comm` with `datatype` (all-reduce, reduce, reduce-scatter).
 *  fp16, bf16 and fp8 multiply in fp32 and round once per element; integers multiply exactly
 *  (wrapping). */
nlcclResult_t nlcclRedOpCreatePreMulSum(nlcclRedOp_t* op, void* scalar, nlcclDataType_t datatype,
                                        nlcclScalarResidence_t residence, nlcclComm_t comm);
/** Destroys an operator made by nlcclRedOpCreatePreMulSum on `comm` (once the calls that use it
 *  have returned; queued calls keep what they need). */
nlcclResult_t nlcclRedOpDestroy(nlcclRedOp_t op, nlcclComm_t comm);

/* ---- parameters (NCCL's parameter API over the NLCCL_* table of the README) ---- */
typedef struct nlcclParamHandle* nlcclParamHandle_t;
/** Binds a parameter by name: "NLCCL_TIMEOUT_MS" or "TIMEOUT_MS". */
nlcclResult_t nlcclParamBind(nlcclParamHandle_t* out, const char* key);
/** The parameter's value (the environment's, else its default) as an integer of the given width;
 *  InvalidArgument when it is not a number or does not fit. */
nlcclResult_t nlcclParamGetI8(nlcclParamHandle_t h, int8_t* out);
nlcclResult_t nlcclParamGetI16(nlcclParamHandle_t h, int16_t* out);
nlcclResult_t nlcclParamGetI32(nlcclParamHandle_t h, int32_t* out);
nlcclResult_t nlcclParamGetI64(nlcclParamHandle_t h, int64_t* out);
nlcclResult_t nlcclParamGetU8(nlcclParamHandle_t h, uint8_t* out);
nlcclResult_t nlcclParamGetU16(nlcclParamHandle_t h, uint16_t* out);
nlcclResult_t nlcclParamGetU32(nlcclParamHandle_t h, uint32_t* out);
nlcclResult_t nlcclParamGetU64(nlcclParamHandle_t h, uint64_t* out);
/** The value as text (valid until the next call on this thread). */
nlcclResult_t nlcclParamGetStr(nlcclParamHandle_t h, const char** out);
/** The text copied into out (maxLen bytes at most, NUL included); *len is its length. */
nlcclResult_t nlcclParamGet(nlcclParamHandle_t h, void* out, int maxLen, int* len);
nlcclResult_t nlcclParamGetParameter(const char* key, const char** value, int* valueLen);
/** Every parameter name (valid until the next call on this thread). */
nlcclResult_t nlcclParamGetAllParameterKeys(const char*** table, int* tableLen);
/** Logs every parameter and its value at INFO (ENV). */
void nlcclParamDumpAll(void);
/** Rereads the NLCCL_DEBUG* variables (NCCL marks it deprecated). */
void nlcclResetDebugInit(void);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // NLCCL_H_
