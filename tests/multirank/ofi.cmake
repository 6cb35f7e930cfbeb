# libfabric transport tests: ranks are forked processes on loopback (FI_TCP_IFACE=lo), over the
# tcp (rxm) and shm providers. Included from tests/multirank/CMakeLists.txt.
if(TARGET nlccl_transport_ofi AND NLCCL_WITH_OFI)
  nlccl_test(multirank_ofi_transport_test
             SOURCES ${CMAKE_CURRENT_LIST_DIR}/ofi_transport_test.cpp
             DEPS nlccl_transport_ofi nlccl_transport_shm nlccl_kernels LABELS multiprocess
             TIMEOUT 120)
endif()
