# ctests of nlccl-perf (bench/perf): run it, parse nccl-tests' table, assert #wrong is 0 everywhere.
# Included from tests/multirank/CMakeLists.txt.
if(TARGET nlccl-perf)
  set(_perf_check ${CMAKE_CURRENT_SOURCE_DIR}/perf_check.sh)
  set(_perf_bin $<TARGET_FILE:nlccl-perf>)

  # Ranks as threads (-t 4): works without multi-process init.
  set(_perf_thread_cases
      "allreduce -b 8 -e 1M -f 8 -o all"
      "allgather -b 8 -e 1M -f 8"
      "reducescatter -b 64 -e 1M -f 8 -o all"
      "broadcast -b 8 -e 1M -f 8 -r -1"
      "reduce -b 8 -e 256K -f 8 -r 2 -o max"
      "alltoall -b 64 -e 1M -f 8"
      "sendrecv -b 8 -e 1M -f 8"
      "allreduce -b 1K -e 64K -f 4 -d all -n 3 -w 1"
      "allreduce -b 4K -e 64K -f 4 -z 1 -d bfloat16 -o avg"
      "alltoallv -b 64 -e 1M -f 8 -d all -n 2 -w 1"
      "gather -b 8 -e 1M -f 8 -r -1"
      "scatter -b 8 -e 1M -f 8 -r all -d half"
      "hypercube -b 64 -e 1M -f 8"
      "reducescatter -b 64 -e 256K -f 8 -o mulsum -d all")
  set(_i 0)
  foreach(_case IN LISTS _perf_thread_cases)
    separate_arguments(_args UNIX_COMMAND "${_case}")
    list(GET _args 0 _coll)
    add_test(NAME perf_threads_${_coll}_${_i}
             COMMAND bash ${_perf_check} threads ${_perf_bin} 4 ${_args} -n 5 -w 2)
    set_tests_properties(perf_threads_${_coll}_${_i} PROPERTIES LABELS "multirank;perf"
                         TIMEOUT 120)
    math(EXPR _i "${_i} + 1")
  endforeach()
  add_test(NAME perf_threads_3ranks_allreduce
           COMMAND bash ${_perf_check} threads ${_perf_bin} 3 allreduce -b 8 -e 1M -f 16 -n 5)
  set_tests_properties(perf_threads_3ranks_allreduce PROPERTIES LABELS "multirank;perf" TIMEOUT 120)
  add_test(NAME perf_bad_flags COMMAND bash ${_perf_check} badflag ${_perf_bin})
  set_tests_properties(perf_bad_flags PROPERTIES LABELS "unit;perf" TIMEOUT 30)

  # Separate processes: standalone (-np 4, forked) and under mpirun.
  add_test(NAME perf_fork_np4_allreduce
           COMMAND bash ${_perf_check} fork ${_perf_bin} 4 allreduce -b 8 -e 1M -f 8 -n 5 -w 2)
  add_test(NAME perf_fork_np4_alltoall
           COMMAND bash ${_perf_check} fork ${_perf_bin} 4 alltoall -b 64 -e 1M -f 8 -n 5 -w 2)
  add_test(NAME perf_fork_np4_hypercube
           COMMAND bash ${_perf_check} fork ${_perf_bin} 4 hypercube -b 64 -e 1M -f 8 -n 3 -w 1)
  # MoE-shaped all-to-all-v (issue 17): the routing generator's counts (skewed, top-2, capacity
  # drops, two experts per rank) run for real over shm by 4 processes, every element checked.
  add_test(NAME perf_fork_np4_alltoallv_moe
           COMMAND bash ${_perf_check} fork ${_perf_bin} 4 alltoallv -b 64K -e 4M -f 4 -n 3 -w 1
                   -d all --moe tokens=256,topk=2,experts=8,dist=zipf:1.2,cf=1.25,seed=3)
  set_tests_properties(perf_fork_np4_allreduce perf_fork_np4_alltoall perf_fork_np4_hypercube
                       perf_fork_np4_alltoallv_moe PROPERTIES
                       LABELS "multiprocess;perf" TIMEOUT 180)
  if(NLCCL_WITH_MPI)
    find_program(_perf_mpirun NAMES mpirun)
    if(_perf_mpirun)
      add_test(NAME perf_mpirun_np4_allreduce
               COMMAND bash ${_perf_check} mpi ${_perf_bin} 4 allreduce -b 8 -e 1M -f 8 -n 5 -w 2)
      set_tests_properties(perf_mpirun_np4_allreduce PROPERTIES
                           LABELS "multiprocess;perf;mpirun" TIMEOUT 180)
      # --compare-mpi: MPI's equivalent timed in the same run; the check parses its columns.
      set(_perf_compare_cases
          "allreduce -b 8 -e 1M -f 8 -o all"
          "allgather -b 64 -e 256K -f 16"
          "reducescatter -b 64 -e 256K -f 16 -d int32 -o max"
          "broadcast -b 8 -e 256K -f 16 -r 1 -d half"
          "reduce -b 8 -e 256K -f 16 -r -1 -d double"
          "alltoall -b 64 -e 256K -f 16"
          "sendrecv -b 8 -e 256K -f 16"
          "alltoallv -b 64 -e 256K -f 16"
          "gather -b 64 -e 256K -f 16 -r 1"
          "scatter -b 64 -e 256K -f 16 -r 0")
      foreach(_case IN LISTS _perf_compare_cases)
        separate_arguments(_args UNIX_COMMAND "${_case}")
        list(GET _args 0 _coll)
        add_test(NAME perf_mpirun_np2_compare_${_coll}
                 COMMAND bash ${_perf_check} mpi ${_perf_bin} 2 ${_args} --compare-mpi -n 4 -w 1)
        set_tests_properties(perf_mpirun_np2_compare_${_coll} PROPERTIES
                             LABELS "multiprocess;perf;mpirun" TIMEOUT 180)
      endforeach()
      # nlccl-compare's medians (over vader, and over tcp against ofi) plotted by nlccl-plot.
      add_test(NAME perf_compare_medians_plot
               COMMAND sh ${PROJECT_SOURCE_DIR}/tests/perf/compare_plot_check.sh
                       ${PROJECT_SOURCE_DIR}/bench/perf/nlccl-compare
                       ${PROJECT_SOURCE_DIR}/bench/plot/nlccl-plot ${_perf_bin})
      set_tests_properties(perf_compare_medians_plot PROPERTIES
                           LABELS "multiprocess;perf;mpirun" TIMEOUT 180 SKIP_RETURN_CODE 77)
    endif()
  endif()
endif()

# The MPI example (examples/02-allreduce-mpi.c) under mpirun.
if(TARGET 02-allreduce-mpi AND NLCCL_WITH_MPI)
  find_program(_perf_mpirun NAMES mpirun)
  if(_perf_mpirun)
    add_test(NAME example_allreduce_mpi_np4
             COMMAND sh -c "root=; [ \"$(id -u)\" = 0 ] && root=--allow-run-as-root; \
exec ${_perf_mpirun} $root --oversubscribe --mca btl self,vader --mca oob_tcp_if_include lo \
-np 4 $<TARGET_FILE:02-allreduce-mpi> 65536")
    set_tests_properties(example_allreduce_mpi_np4 PROPERTIES LABELS "multiprocess;perf"
                         TIMEOUT 120 PASS_REGULAR_EXPRESSION "correct \\(0 wrong\\)")
  endif()
endif()

# Modelled time and busbw columns over the simulated NeuronLink transport.
if(TARGET nlccl-perf)
  add_test(NAME perf_neuronlink_modelled_columns
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/perf_model_check.sh $<TARGET_FILE:nlccl-perf>)
  set_tests_properties(perf_neuronlink_modelled_columns PROPERTIES LABELS "multirank;perf"
                       TIMEOUT 120)
endif()
