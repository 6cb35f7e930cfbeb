# libfabric transport tests: ranks are forked processes on loopback (FI_TCP_IFACE=lo), over the
# tcp (rxm) and shm providers. Included from tests/multirank/CMakeLists.txt.
if(TARGET nlccl_transport_ofi AND NLCCL_WITH_OFI)
  # The measurement and the second kill / registration variants run in the slow set.
  set(_ofi_slow "*PingPong*:*KilledPeerFailsOthers2Ranks*:*ReduceWithRegistration*")
  add_executable(multirank_ofi_transport_test ${CMAKE_CURRENT_LIST_DIR}/ofi_transport_test.cpp)
  target_link_libraries(multirank_ofi_transport_test PRIVATE nlccl_transport_ofi
                        nlccl_transport_shm nlccl_kernels GTest::gtest GTest::gtest_main)
  target_include_directories(multirank_ofi_transport_test PRIVATE ${PROJECT_SOURCE_DIR}/tests)
  gtest_discover_tests(multirank_ofi_transport_test DISCOVERY_TIMEOUT 60
                       TEST_FILTER "-${_ofi_slow}" PROPERTIES LABELS multiprocess TIMEOUT 120)
  gtest_discover_tests(multirank_ofi_transport_test DISCOVERY_TIMEOUT 60
                       TEST_FILTER "${_ofi_slow}" PROPERTIES LABELS "slow;multiprocess" TIMEOUT 300)
endif()

# Collectives over ofi in forked processes. The default run covers a few data types per
# collective; the OfiFull sweep (every type and op) is labelled slow.
if(TARGET nlccl_transport_ofi AND NLCCL_WITH_OFI)
  add_executable(multirank_ofi_test ${CMAKE_CURRENT_LIST_DIR}/ofi_test.cpp)
  target_link_libraries(multirank_ofi_test PRIVATE nlccl_test_cases GTest::gtest GTest::gtest_main)
  target_include_directories(multirank_ofi_test PRIVATE ${PROJECT_SOURCE_DIR}/tests)
  gtest_discover_tests(multirank_ofi_test DISCOVERY_TIMEOUT 60 TEST_FILTER "-OfiFull/*"
                       PROPERTIES LABELS multiprocess TIMEOUT 180)
  gtest_discover_tests(multirank_ofi_test DISCOVERY_TIMEOUT 60 TEST_FILTER "OfiFull/*"
                       PROPERTIES LABELS "slow;multiprocess" TIMEOUT 900)
endif()

# nlccl-perf under mpirun over ofi/tcp (MPI itself over its tcp btl), loopback only: #wrong is 0.
if(TARGET nlccl_transport_ofi AND NLCCL_WITH_OFI AND TARGET nlccl-perf AND NLCCL_WITH_MPI)
  find_program(_ofi_mpirun NAMES mpirun)
  if(_ofi_mpirun)
    set(_ofi_perf_env "NLCCL_TRANSPORT=ofi;FI_PROVIDER=tcp;FI_TCP_IFACE=lo;PERF_CHECK_MPI_BTL=self,tcp")
    foreach(_case "allreduce -b 8 -e 1M -f 8 -o all" "alltoall -b 64 -e 1M -f 8"
                  "sendrecv -b 8 -e 1M -f 8")
      separate_arguments(_args UNIX_COMMAND "${_case}")
      list(GET _args 0 _coll)
      add_test(NAME perf_mpirun_ofi_np4_${_coll}
               COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/perf_check.sh mpi $<TARGET_FILE:nlccl-perf> 4
                       ${_args} -n 5 -w 2)
      set_tests_properties(perf_mpirun_ofi_np4_${_coll} PROPERTIES
                           LABELS "multiprocess;perf;mpirun" TIMEOUT 180 ENVIRONMENT "${_ofi_perf_env}")
    endforeach()
    add_test(NAME perf_mpirun_ofi_np2_compare_allreduce
             COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/perf_check.sh mpi $<TARGET_FILE:nlccl-perf> 2
                     allreduce -b 8 -e 4M -f 16 --compare-mpi -n 5 -w 1)
    set_tests_properties(perf_mpirun_ofi_np2_compare_allreduce PROPERTIES
                         LABELS "multiprocess;perf;mpirun" TIMEOUT 180 ENVIRONMENT "${_ofi_perf_env}")
  endif()
endif()

# One machine as two hosts (NLCCL_HOSTID a,a,b,b): shm inside a host, ofi across, hier by host.
if(TARGET nlccl_transport_ofi AND NLCCL_WITH_OFI)
  nlccl_test(multirank_mixed_hosts_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/mixed_hosts_test.cpp
             DEPS nlccl_test_cases LABELS multiprocess TIMEOUT 180)
endif()
