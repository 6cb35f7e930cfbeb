# Installs the header, libnlccl.so, a CMake package (find_package(nlccl) -> nlccl::nlccl) and
# nlccl.pc. tests/packaging builds a small C program against the installed tree.
include(CMakePackageConfigHelpers)

install(TARGETS nlccl EXPORT nlcclTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${PROJECT_SOURCE_DIR}/include/nlccl.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
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
install(FILES ${PROJECT_BINARY_DIR}/nlccl.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
