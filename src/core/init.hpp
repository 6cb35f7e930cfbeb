// Making communicators: n ranks as threads of this process, and splitting one.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/comm.hpp"

namespace nlccl::core {

/// Largest communicator (the bootstrap's limit) and largest group of ranks that are threads of
/// one process (each gets a thread at init).
constexpr int kMaxRanks = 1 << 16;
constexpr int kMaxThreadRanks = 4096;

/// InvalidArgument (logged, naming the valid ones) unless `choice` is "auto" or a transport the
/// registry has.
Status checkTransportChoice(const std::string& choice);

/// The communicator of rank `rank` of an in-process group of `n` meeting at `rv` (collective:
/// every rank of the group runs this at once, on its own thread).
Status makeThreadComm(int rank, int n, const std::shared_ptr<LocalRendezvous>& rv,
                      const CommConfig& config, std::unique_ptr<Communicator>* out);

/// n communicators whose ranks are threads of this process (nlcclCommInitAll).
Status initAll(int n, const CommConfig& config, std::vector<std::unique_ptr<Communicator>>* out);

/// Collective over `parent`: ranks with the same color form a communicator ordered by (key, old
/// rank). color < 0 gives *out = nullptr.
Status split(Communicator* parent, int color, int key, const CommConfig& config,
             std::unique_ptr<Communicator>* out);

}  // namespace nlccl::core
