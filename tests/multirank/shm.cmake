# Shared-memory transport tests: ranks are forked processes. Included from
# tests/multirank/CMakeLists.txt.
if(TARGET nlccl_transport_shm)
  nlccl_test(multirank_shm_transport_test
             SOURCES ${CMAKE_CURRENT_LIST_DIR}/shm_transport_test.cpp
             DEPS nlccl_transport_shm nlccl_kernels LABELS multirank)
  # The LL FIFO: ordering across the threshold, a full FIFO, kills, collectives around it.
  nlccl_test(multirank_shm_ll_test
             SOURCES ${CMAKE_CURRENT_LIST_DIR}/shm_ll_test.cpp
             DEPS nlccl_test_cases nlccl_transport_shm nlccl_kernels LABELS multiprocess
             TIMEOUT 240)
  # Transport::exchange (a one-exchange step in one call): against posted halves, reductions,
  # a killed peer, a peer that never sends.
  nlccl_test(multirank_shm_exchange_test
             SOURCES ${CMAKE_CURRENT_LIST_DIR}/shm_exchange_test.cpp
             DEPS nlccl_transport_shm nlccl_kernels LABELS multirank TIMEOUT 120)
  # Split exchanges: each rank of a recursive-doubling round reduces half into both outputs.
  nlccl_test(multirank_shm_split_test
             SOURCES ${CMAKE_CURRENT_LIST_DIR}/shm_split_test.cpp
             DEPS nlccl_api nlccl_transport_shm nlccl_kernels LABELS multirank TIMEOUT 180)
  # nlcclMemAlloc and the single-copy path (through the transport and through the C API).
  nlccl_test(multirank_memalloc_test
             SOURCES ${CMAKE_CURRENT_LIST_DIR}/memalloc_test.cpp
             DEPS nlccl_api nlccl_transport_shm nlccl_kernels LABELS multirank TIMEOUT 180)
endif()
