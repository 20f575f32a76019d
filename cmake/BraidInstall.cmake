# Installation and packaging (docs/INSTALL.md):
#
#   cmake --install build --prefix P   P/bin/braid, P/lib/libbraid_*.so.<version>, the public headers under
#                                      P/include/braid/<layer>/..., a CMake package (find_package(braid
#                                      CONFIG): braid::braid and one imported target per layer) and
#                                      P/lib/pkgconfig/braid.pc. Nothing in the tree names P: it can move.
#   make package                       build/braid_<version>_amd64.deb (CPack), with the same files under /usr
#                                      and Depends computed from the binaries (dpkg-shlibdeps).
include(CMakePackageConfigHelpers)

set(BRAID_CMAKE_INSTALL_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/braid")
get_property(_braid_libraries GLOBAL PROPERTY BRAID_LIBRARIES)

# braid::braid: everything a program of one's own or a plugin links (the layers come with it).
add_library(braid_all INTERFACE)
target_link_libraries(braid_all INTERFACE braid::cli braid::runtime)
set_target_properties(braid_all PROPERTIES EXPORT_NAME braid)
add_library(braid::braid ALIAS braid_all)

set(_braid_exported ${_braid_libraries} braid_all)
if(TARGET braid_nccl_lib)
  list(APPEND _braid_exported braid_nccl_lib)  # NCCL's headers and library, from the CUDA toolkit's folder
endif()
install(TARGETS ${_braid_exported} EXPORT braidTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} NAMELINK_COMPONENT Unspecified
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/braid ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS braid RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(EXPORT braidTargets NAMESPACE braid:: DESTINATION ${BRAID_CMAKE_INSTALL_DIR})

# Headers: every layer's, under include/braid/<layer>/, so that the installed tree includes them exactly as
# the source tree does ("runtime/plugin/plugin.h"); the generated base/config.h goes with them.
foreach(_layer base tensor store autograd collectives rpc object_collectives nn parallel dist_autograd runtime bench
               cli)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${_layer} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/braid
          FILES_MATCHING PATTERN "*.h" PATTERN "*.cuh")
endforeach()
install(FILES ${PROJECT_BINARY_DIR}/generated/base/config.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/braid/base)

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/install/braidConfig.cmake.in
  ${PROJECT_BINARY_DIR}/install/braidConfig.cmake
  INSTALL_DESTINATION ${BRAID_CMAKE_INSTALL_DIR}
  PATH_VARS CMAKE_INSTALL_BINDIR)
# A plugin must be built against this exact version (runtime/plugin/plugin.h checks at load time), so the
# package promises no more than the same major.minor.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/install/braidConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/install/braidConfig.cmake ${PROJECT_BINARY_DIR}/install/braidConfigVersion.cmake
        DESTINATION ${BRAID_CMAKE_INSTALL_DIR})

# pkg-config: the prefix is found from the .pc file's own place, so the tree stays relocatable.
file(RELATIVE_PATH BRAID_PC_TO_PREFIX "${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig" "${CMAKE_INSTALL_PREFIX}")
string(REGEX REPLACE "/$" "" BRAID_PC_TO_PREFIX "${BRAID_PC_TO_PREFIX}")
set(BRAID_PC_LIBS "")
foreach(_lib ${_braid_libraries})
  get_target_property(_type ${_lib} TYPE)
  if(_type STREQUAL "SHARED_LIBRARY")
    string(APPEND BRAID_PC_LIBS " -l${_lib}")
  endif()
endforeach()
set(BRAID_PC_REQUIRES "spdlog fmt nlohmann_json ompi-cxx")
if(BRAID_HAVE_UCX)
  string(APPEND BRAID_PC_REQUIRES " ucx")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/install/braid.pc.in ${PROJECT_BINARY_DIR}/install/braid.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/install/braid.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# --- the Debian package (make package)
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME braid)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "braid developers <braid-dev@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "braid: a distributed deep-learning runtime (collectives, RPC, DDP, FSDP)")
set(CPACK_PACKAGE_DESCRIPTION
    "The braid executable (braid run/check/launch/bench/info), its shared libraries, headers, CMake package\n"
    "and pkg-config file. Models of one's own are plugins: docs/PLUGINS.md.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # braid_<version>_amd64.deb
set(CPACK_DEBIAN_PACKAGE_SECTION science)
# Depends: the Debian packages of every library the binaries load, found by dpkg-shlibdeps (libraries that
# no package owns, such as the CUDA toolkit's under /usr/local/cuda, are left out: docs/INSTALL.md), plus
# Open MPI's launcher, which `braid run` jobs are started with.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "openmpi-bin")
# What building a plugin or a program against the installed headers needs (apt installs Recommends).
set(_braid_dev_packages libspdlog-dev libfmt-dev nlohmann-json3-dev libboost-dev libopenmpi-dev cmake pkg-config g++)
if(BRAID_HAVE_GLOO)
  list(APPEND _braid_dev_packages libgloo-dev)
endif()
if(BRAID_HAVE_UCX)
  list(APPEND _braid_dev_packages libucx-dev)
endif()
list(JOIN _braid_dev_packages ", " CPACK_DEBIAN_PACKAGE_RECOMMENDS)
include(CPack)
