# Helpers that make every braid target the same way.
#
#   braid_add_library(<name> SOURCES ... [DEPS ...] [PRIVATE_DEPS ...])
#     creates braid_<name> and the alias braid::<name>; includes are rooted at the repository.
#   braid_add_test(<name> SOURCES ... DEPS ... [LABELS ...] [TIMEOUT s])
#     a Catch2 test executable registered with CTest.

function(braid_add_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  if(ARG_SOURCES)
    add_library(braid_${name} STATIC ${ARG_SOURCES})
    set(_scope PUBLIC)
  else()
    add_library(braid_${name} INTERFACE)
    set(_scope INTERFACE)
  endif()
  add_library(braid::${name} ALIAS braid_${name})
  target_include_directories(braid_${name} ${_scope} $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
                                                     $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/generated>)
  target_compile_features(braid_${name} ${_scope} cxx_std_20)
  target_link_libraries(braid_${name} ${_scope} ${ARG_DEPS})
  if(ARG_SOURCES)
    target_link_libraries(braid_${name} PRIVATE braid_warnings ${ARG_PRIVATE_DEPS})
    target_link_libraries(braid_${name} PUBLIC braid_sanitizers)
    set_target_properties(braid_${name} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  endif()
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
