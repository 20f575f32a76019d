# Feature options. Each BRAID_WITH_* takes AUTO (on when found), ON (found or a configure error) or OFF.
set(_braid_tristate AUTO ON OFF)
foreach(_opt CUDA NCCL UCX GLOO ISAL)
  set(BRAID_WITH_${_opt} AUTO CACHE STRING "Build with ${_opt}: AUTO, ON or OFF")
  set_property(CACHE BRAID_WITH_${_opt} PROPERTY STRINGS ${_braid_tristate})
  if(NOT BRAID_WITH_${_opt} IN_LIST _braid_tristate)
    message(FATAL_ERROR "BRAID_WITH_${_opt}=${BRAID_WITH_${_opt}}: expected AUTO, ON or OFF")
  endif()
endforeach()

set(BRAID_SANITIZE "" CACHE STRING "Sanitizers: empty, 'address,undefined' or 'thread'")
set(BRAID_CUDA_HOME "/usr/local/cuda" CACHE PATH "Where the CUDA toolkit and NCCL live")
set(BRAID_WERROR OFF CACHE BOOL "Treat warnings as errors")

# Resolves one AUTO/ON/OFF option against whether the dependency was found.
# Sets BRAID_HAVE_<opt> in the caller's scope.
function(braid_resolve_option opt found what)
  if(BRAID_WITH_${opt} STREQUAL "OFF")
    set(BRAID_HAVE_${opt} OFF PARENT_SCOPE)
  elseif(found)
    set(BRAID_HAVE_${opt} ON PARENT_SCOPE)
  elseif(BRAID_WITH_${opt} STREQUAL "ON")
    message(FATAL_ERROR "BRAID_WITH_${opt}=ON but ${what} was not found")
  else()
    set(BRAID_HAVE_${opt} OFF PARENT_SCOPE)
  endif()
endfunction()
