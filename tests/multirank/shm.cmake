# Shared-memory transport tests: ranks are forked processes. Included from
# tests/multirank/CMakeLists.txt.
if(TARGET nlccl_transport_shm)
  nlccl_test(multirank_shm_transport_test
             SOURCES ${CMAKE_CURRENT_LIST_DIR}/shm_transport_test.cpp
             DEPS nlccl_transport_shm nlccl_kernels LABELS multirank)
endif()
