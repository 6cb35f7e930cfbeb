// The Python module nlccl_torch._C: the ProcessGroupNlccl class (a torch.distributed
// ProcessGroup) that nlccl_torch/__init__.py registers as the "nlccl" backend.
#include <pybind11/chrono.h>
#include <torch/python.h>

#include "process_group.hpp"

namespace py = pybind11;

PYBIND11_MODULE(_C, m) {
  m.doc() = "nlccl process group for torch.distributed (import nlccl_torch to register it)";
  // The c10d base classes (ProcessGroup, Store, Work) must be registered before the subclass.
  py::module::import("torch.distributed");

  py::class_<nlccl_torch::ProcessGroupNlccl, c10d::ProcessGroup,
             c10::intrusive_ptr<nlccl_torch::ProcessGroupNlccl>>(m, "ProcessGroupNlccl")
      .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                       std::chrono::milliseconds timeout) {
             return c10::make_intrusive<nlccl_torch::ProcessGroupNlccl>(store, rank, size,
                                                                        timeout);
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"),
           py::arg("timeout") = kProcessGroupDefaultTimeout,
           // Creation waits for every rank: other threads (and ranks' stores) must run meanwhile.
           py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("timeout", &nlccl_torch::ProcessGroupNlccl::timeout);

  m.def("nlccl_version", [] {
    int v = 0;
    nlcclGetVersion(&v);
    return v;
  }, "nlcclGetVersion() of the libnlccl.so in use (major*10000 + minor*100 + patch)");
}
