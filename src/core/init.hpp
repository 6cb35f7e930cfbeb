// Making communicators: n ranks as threads of this process (loopback), and splitting one.
#pragma once

#include <memory>
#include <vector>

#include "core/comm.hpp"
#include "transports/neuronlink/link_model.hpp"

namespace nlccl::core {

/// The fabric model of the neuronlink transport for `nranks` ranks (config.topology and the
/// NLCCL_NEURONLINK_* environment).
Status neuronLinkModel(const CommConfig& config, int nranks,
                       std::shared_ptr<const transport::LinkModel>* out);

/// n communicators sharing an in-process loopback fabric (nlcclCommInitAll).
Status initAll(int n, const CommConfig& config, std::vector<std::unique_ptr<Communicator>>* out);

/// Collective over `parent`: ranks with the same color form a communicator ordered by (key, old
/// rank). color < 0 gives *out = nullptr.
Status split(Communicator* parent, int color, int key, const CommConfig& config,
             std::unique_ptr<Communicator>* out);

}  // namespace nlccl::core
