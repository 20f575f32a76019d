# Sanitizer builds: -DBRAID_SANITIZE=address,undefined or -DBRAID_SANITIZE=thread.
add_library(braid_sanitizers INTERFACE)
if(BRAID_SANITIZE)
  string(REPLACE "," ";" _san_list "${BRAID_SANITIZE}")
  foreach(_s ${_san_list})
    if(NOT _s MATCHES "^(address|undefined|thread|leak)$")
      message(FATAL_ERROR "BRAID_SANITIZE: unknown sanitizer '${_s}'")
    endif()
  endforeach()
  if("thread" IN_LIST _san_list AND "address" IN_LIST _san_list)
    message(FATAL_ERROR "BRAID_SANITIZE: thread and address cannot be combined")
  endif()
  set(_san_flags -fsanitize=${BRAID_SANITIZE} -fno-omit-frame-pointer)
  if("undefined" IN_LIST _san_list)
    list(APPEND _san_flags -fno-sanitize-recover=undefined)
  endif()
  target_compile_options(braid_sanitizers INTERFACE $<$<COMPILE_LANGUAGE:CXX>:${_san_flags}>)
  target_link_options(braid_sanitizers INTERFACE ${_san_flags})
endif()

# Run-time options for tests launched under mpirun in a sanitizer build, for their ENVIRONMENT property.
# Open MPI keeps process-lifetime allocations that LeakSanitizer reports at exit; the suppressions name only
# Open MPI's and its dependencies' libraries. They match only with full malloc stacks (the fast unwinder
# stops at Open MPI's frame-pointer-less code) and while MCA components stay loaded to be symbolised.
set(BRAID_MPI_TEST_ENV "")
if("address" IN_LIST _san_list)
  set(BRAID_MPI_TEST_ENV
    "ASAN_OPTIONS=protect_shadow_gap=0:fast_unwind_on_malloc=0:allocator_may_return_null=1"
    "LSAN_OPTIONS=suppressions=${PROJECT_SOURCE_DIR}/scripts/sanitizers/lsan.supp:print_suppressions=0"
    "OMPI_MCA_mca_base_component_disable_dlclose=1")
elseif("thread" IN_LIST _san_list)
  # UCX_MEM_MMAP_HOOK_MODE=none: UCX's libucm patches madvise/mmap, and TSan's interceptors crash inside
  # those hooks when a thread exits (any binary that links UCX, such as `braid`).
  set(BRAID_MPI_TEST_ENV
    "TSAN_OPTIONS=suppressions=${PROJECT_SOURCE_DIR}/scripts/sanitizers/tsan.supp:halt_on_error=1:allocator_may_return_null=1"
    "OMPI_MCA_mca_base_component_disable_dlclose=1"
    "UCX_MEM_MMAP_HOOK_MODE=none")
endif()
