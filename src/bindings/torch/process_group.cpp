#include "process_group.hpp"

#include <Python.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <climits>
#include <cstring>

namespace nlccl_torch {

namespace {

// Key of rank 0's unique id in the group's (prefixed) c10d store.
constexpr const char* kUniqueIdKey = "nlccl_torch/unique_id";

nlcclUniqueId exchangeUniqueId(const c10::intrusive_ptr<c10d::Store>& store, int rank) {
  nlcclUniqueId id;
  if (rank == 0) {
    nlcclResult_t r = nlcclGetUniqueId(&id);
    TORCH_CHECK(r == nlcclSuccess, "nlccl_torch: ", nlcclFailure(nullptr, "nlcclGetUniqueId", r));
    store->set(kUniqueIdKey, std::vector<uint8_t>(id.internal, id.internal + sizeof id.internal));
    return id;
  }
  std::vector<uint8_t> bytes = store->get(kUniqueIdKey);  // waits up to the store's timeout
  TORCH_CHECK(bytes.size() == sizeof id.internal, "nlccl_torch: the unique id in the store has ",
              bytes.size(), " bytes, expected ", sizeof id.internal);
  std::memcpy(id.internal, bytes.data(), sizeof id.internal);
  return id;
}

}  // namespace

ProcessGroupNlccl::ProcessGroupNlccl(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                     int size, std::chrono::milliseconds timeout)
    : ProcessGroup(rank, size), timeout_(timeout) {
  TORCH_CHECK(store, "nlccl_torch: the process group needs a c10d store");
  nlcclUniqueId id = exchangeUniqueId(store, rank);
  nlcclConfig_t config = NLCCL_CONFIG_INITIALIZER;
  // The timeout given to init_process_group bounds every wait for a peer.
  config.timeoutMs = static_cast<int>(std::clamp<int64_t>(timeout.count(), 1, INT_MAX));
  const std::string name = "torch-rank" + std::to_string(rank);
  config.commName = name.c_str();
  nlcclComm_t comm = nullptr;
  nlcclResult_t r = nlcclCommInitRankConfig(&comm, size, id, rank, &config);
  TORCH_CHECK(r == nlcclSuccess, "nlccl_torch: rank ", rank, " of ", size, ": ",
              nlcclFailure(nullptr, "nlcclCommInitRankConfig", r));
  queue_ = std::make_shared<Queue>(comm, rank);
  init();
}

ProcessGroupNlccl::~ProcessGroupNlccl() {
  // Python drops the last reference with the GIL held, and shutting down waits for the completion
  // thread, whose future callbacks may need the GIL.
  PyThreadState* saved = nullptr;
  if (Py_IsInitialized() && PyGILState_Check()) saved = PyEval_SaveThread();
  Queue::shutdown(std::move(queue_));
  if (saved != nullptr) PyEval_RestoreThread(saved);
}

c10::intrusive_ptr<WorkNlccl> ProcessGroupNlccl::makeWork(c10d::OpType type,
                                                          std::vector<at::Tensor> outputs) {
  return c10::make_intrusive<WorkNlccl>(rank_, type, std::move(outputs));
}

void ProcessGroupNlccl::checkRank(int64_t r, const char* what, const char* name) const {
  TORCH_CHECK(r >= 0 && r < size_, "nlccl_torch: ", what, ": ", name, " ", r,
              " is out of range (the group has ", size_, " ranks)");
}

}  // namespace nlccl_torch
