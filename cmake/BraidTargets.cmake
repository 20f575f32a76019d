# Helpers that make every braid target the same way.
#
#   braid_add_library(<name> SOURCES ... [DEPS ...] [PRIVATE_DEPS ...])
#     creates the shared library braid_<name> (libbraid_<name>.so.<major>.<minor>) and the alias braid::<name>;
#     includes are rooted at the repository in the build tree and at <prefix>/include/braid once installed
#     (cmake/BraidInstall.cmake installs every library made here and exports it as braid::<name>).
#   braid_add_test(<name> SOURCES ... DEPS ... [LABELS ...] [TIMEOUT s])
#     a Catch2 test executable registered with CTest.
include(GNUInstallDirs)

# Shared libraries, so that a plugin loaded at run time (runtime/plugin/) and the executable that loads it
# use one copy of braid: one model registry, one set of process groups. The SONAME carries major.minor:
# before 1.0 a minor release may break the ABI, and a plugin is refused unless built against this version.
set(BRAID_SOVERSION "${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR}")

# The installed tree is relocatable: executables find braid's libraries beside them through $ORIGIN, and
# libraries found outside the system's directories (the CUDA toolkit's) stay on the run path.
file(RELATIVE_PATH _braid_bin_to_lib "${CMAKE_INSTALL_FULL_BINDIR}" "${CMAKE_INSTALL_FULL_LIBDIR}")
set(CMAKE_INSTALL_RPATH "$ORIGIN" "$ORIGIN/${_braid_bin_to_lib}")
set(CMAKE_INSTALL_RPATH_USE_LINK_PATH TRUE)

function(braid_add_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  if(ARG_SOURCES)
    add_library(braid_${name} SHARED ${ARG_SOURCES})
    set(_scope PUBLIC)
    # DEFINE_SYMBOL "": no braid_<name>_EXPORTS define; braid exports every symbol and needs no macro.
    set_target_properties(braid_${name} PROPERTIES VERSION ${PROJECT_VERSION} SOVERSION ${BRAID_SOVERSION}
                                                   DEFINE_SYMBOL "")
  else()
    add_library(braid_${name} INTERFACE)
    set(_scope INTERFACE)
  endif()
  add_library(braid::${name} ALIAS braid_${name})
  set_target_properties(braid_${name} PROPERTIES EXPORT_NAME ${name})
  target_include_directories(braid_${name} ${_scope} $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
                                                     $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/generated>
                                                     $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/braid>
                                                     $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_compile_features(braid_${name} ${_scope} cxx_std_20)
  target_link_libraries(braid_${name} ${_scope} ${ARG_DEPS})
  if(ARG_SOURCES)
    target_link_libraries(braid_${name} PRIVATE braid_warnings ${ARG_PRIVATE_DEPS})
    target_link_libraries(braid_${name} PUBLIC $<BUILD_INTERFACE:braid_sanitizers>)
  endif()
  set_property(GLOBAL APPEND PROPERTY BRAID_LIBRARIES braid_${name})
endfunction()

function(braid_add_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE braid_test_main ${ARG_DEPS} braid_warnings braid_sanitizers)
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 120)
  endif()
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES TIMEOUT ${ARG_TIMEOUT} LABELS "unit;${ARG_LABELS}")
endfunction()
