# libfabric transport tests: ranks are forked processes on loopback (FI_TCP_IFACE=lo), over the
# tcp (rxm) and shm providers. Included from tests/multirank/CMakeLists.txt.
if(TARGET nlccl_transport_ofi AND NLCCL_WITH_OFI)
  nlccl_test(multirank_ofi_transport_test
             SOURCES ${CMAKE_CURRENT_LIST_DIR}/ofi_transport_test.cpp
             DEPS nlccl_transport_ofi nlccl_transport_shm nlccl_kernels LABELS multiprocess
             TIMEOUT 120)
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
