# Installs the C header and libnlccl.so (nlccl::nlccl), the public C++ model API headers and
# libnlccl-sim.so (nlccl::sim), one CMake package (find_package(nlccl)) and nlccl.pc /
# nlccl-sim.pc. tests/packaging builds a C program and a C++ simulator program against the
# installed tree.
include(CMakePackageConfigHelpers)

install(TARGETS nlccl nlccl_model EXPORT nlcclTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${PROJECT_SOURCE_DIR}/include/nlccl.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/nlccl DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.hpp")
install(EXPORT nlcclTargets NAMESPACE nlccl:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/nlccl)

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/nlcclConfig.cmake.in
  ${PROJECT_BINARY_DIR}/nlcclConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/nlccl)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/nlcclConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/nlcclConfig.cmake ${PROJECT_BINARY_DIR}/nlcclConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/nlccl)

# Relocatable: the .pc file finds the prefix from its own location.
file(RELATIVE_PATH NLCCL_PC_TO_PREFIX ${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig ${CMAKE_INSTALL_PREFIX})
configure_file(${PROJECT_SOURCE_DIR}/cmake/nlccl.pc.in ${PROJECT_BINARY_DIR}/nlccl.pc @ONLY)
configure_file(${PROJECT_SOURCE_DIR}/cmake/nlccl-sim.pc.in ${PROJECT_BINARY_DIR}/nlccl-sim.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/nlccl.pc ${PROJECT_BINARY_DIR}/nlccl-sim.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
