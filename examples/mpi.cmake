# The MPI-launched all-reduce example (included from examples/CMakeLists.txt).
if(NLCCL_WITH_MPI)
  add_executable(02-allreduce-mpi 02-allreduce-mpi.c)
  target_link_libraries(02-allreduce-mpi PRIVATE nlccl::nlccl MPI::MPI_C)
  set_target_properties(02-allreduce-mpi PROPERTIES C_STANDARD 99)
endif()
