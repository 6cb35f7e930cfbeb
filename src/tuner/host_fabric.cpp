#include "tuner/host_fabric.hpp"

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <thread>

#include "util/log.hpp"
#include "util/params.hpp"

#ifndef NLCCL_HAVE_HWLOC
#define NLCCL_HAVE_HWLOC 0
#endif
#if NLCCL_HAVE_HWLOC
#include <hwloc.h>
#endif

namespace nlccl::tuner {

HostShape hostShape() {
  static const HostShape shape = [] {
    HostShape s;
    s.cores = s.pus = std::max(1u, std::thread::hardware_concurrency());
#if NLCCL_HAVE_HWLOC
    hwloc_topology_t t;
    if (hwloc_topology_init(&t) == 0) {
      if (hwloc_topology_load(t) == 0) {
        s.cores = std::max(1, hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE));
        s.pus = std::max(1, hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PU));
        s.numaNodes = std::max(1, hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE));
      }
      hwloc_topology_destroy(t);
    }
#endif
    INFO(log::kTune, "host: %d cores, %d hardware threads, %d NUMA nodes%s", s.cores, s.pus,
         s.numaNodes, NLCCL_HAVE_HWLOC ? " (hwloc)" : " (no hwloc: assumed)");
    return s;
  }();
  return shape;
}

std::string hostFabricJson(int ranksPerHost, int hosts, size_t sliceBytes, const HostShape& shape,
                           bool ofiInsideHosts) {
  const double shmLat = paramTunerShmLatencyUs().value, shmBw = paramTunerShmBandwidthGbps().value;
  const double ofiLat = paramTunerOfiLatencyUs().value, ofiBw = paramTunerOfiBandwidthGbps().value;
  const double mem = paramTunerMemBandwidthGbps().value, launch = paramTunerLaunchUs().value;
  // More ranks than hardware threads: a message waits for its receiver to be scheduled.
  const double over = std::max(1.0, static_cast<double>(ranksPerHost) / shape.pus);
  const double hostLat = (ofiInsideHosts ? ofiLat : shmLat) * over;
  const double window = static_cast<double>(paramShmSlots().value) *
                        static_cast<double>(paramShmSlotBytes().value);
  char buf[2048];
  // Over shared memory a large message is copied by its receiver straight out of the sender's
  // buffer (the shm transport's single-copy path): the receiver's engine moves the bytes and a
  // sender read by two receivers is not slowed by it, so the host's links do not bind. Over ofi
  // the sender copies into its socket and the receiver out of it (one shared engine).
  const bool pulled = !ofiInsideHosts;
  char shmBwText[64];
  if (pulled) std::snprintf(shmBwText, sizeof shmBwText, R"("inf")");
  else std::snprintf(shmBwText, sizeof shmBwText, "%g", shmBw);
  std::string levels;
  const int numa = shape.numaNodes > 1 && ranksPerHost % shape.numaNodes == 0 &&
                           ranksPerHost > shape.numaNodes
                       ? shape.numaNodes
                       : 1;
  if (numa > 1) {
    std::snprintf(buf, sizeof buf,
                  R"({"name": "numa", "kind": "switch", "size": %d, "attach": "chip", "bw_GBps": %s, "latency_us": %g},)"
                  R"({"name": "host", "kind": "switch", "size": %d, "attach": "below", "bw_GBps": %s, "latency_us": 0})",
                  ranksPerHost / numa, shmBwText, hostLat, numa, shmBwText);
  } else {
    std::snprintf(buf, sizeof buf,
                  R"({"name": "host", "kind": "switch", "size": %d, "attach": "chip", "bw_GBps": %s, "latency_us": %g})",
                  ranksPerHost, shmBwText, hostLat);
  }
  levels = buf;
  if (hosts > 1) {
    std::snprintf(buf, sizeof buf,
                  R"(,{"name": "network", "kind": "switch", "size": %d, "attach": "below", "bw_GBps": %g, "latency_us": %g})",
                  hosts, ofiBw / ranksPerHost, std::max(0.0, ofiLat - hostLat));
    levels += buf;
  }
  std::snprintf(buf, sizeof buf,
                R"({"name": "host:%dx%d", "ranks_per_chip": 1, "launch_overhead_us": %g, )"
                R"("pair_window_bytes": %.0f, "chunk_bytes": %zu, )"
                R"("chip": {"name": "rank", "dma_engines": 1, "dma_engine_GBps": %g, "hbm_GBps": %g, )"
                R"("hbm_bytes_per_reduced_byte": 2, "local_latency_us": 0, "shared_engine": %s, )"
                R"("receiver_copies": %s}, )"
                R"("levels": [)",
                hosts, ranksPerHost, launch, window, sliceBytes, shmBw, mem,
                ofiInsideHosts ? "true" : "false", pulled ? "true" : "false");
  return std::string(buf) + levels + "]}";
}

Status hostFabric(int nranks, const std::vector<int>& groups, size_t sliceBytes,
                  bool ofiInsideHosts, fabric::Topology* out, std::string* error) {
  const std::string file = paramTunerTopology().value;
  if (!file.empty())  // sliced as this library slices
    return fabric::Topology::load(file, {"chunk_bytes=" + std::to_string(sliceBytes)}, out, error);
  int perHost = nranks, hosts = 1;
  if (groups.size() == 2 && groups[0] * groups[1] == nranks) {
    perHost = groups[0];
    hosts = groups[1];
  }
  // hwloc sees this host only; every host must reach the same choice, so across hosts its
  // shape is left out (no NUMA split, no oversubscription).
  HostShape shape = hostShape();
  if (hosts > 1) shape = HostShape{perHost, perHost, 1};
  const std::string doc = hostFabricJson(perHost, hosts, sliceBytes, shape,
                                         ofiInsideHosts && perHost > 1);
  TRACE(log::kTune, "host fabric (NLCCL_TUNER_TOPOLOGY takes a file like it): %s", doc.c_str());
  return fabric::Topology::fromJsonText(doc, {}, out, error);
}

}  // namespace nlccl::tuner
