# Google Benchmark of the shared-memory transport's FIFO. Included from bench/micro/CMakeLists.txt
# (after find_package(benchmark)).
if(benchmark_FOUND AND TARGET nlccl_transport_shm)
  add_executable(nlccl-bench-shm-fifo ${CMAKE_CURRENT_LIST_DIR}/shm_fifo_bench.cpp)
  target_link_libraries(nlccl-bench-shm-fifo PRIVATE nlccl_transport_shm benchmark::benchmark)
endif()
