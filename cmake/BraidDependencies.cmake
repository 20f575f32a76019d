# Finds braid's dependencies. Required ones fail configure with a hint to run scripts/setup.sh;
# optional engines resolve their BRAID_WITH_* option (AUTO/ON/OFF) into BRAID_HAVE_*.
set(_hint "run scripts/setup.sh to install braid's dependencies")

find_package(Threads REQUIRED)
find_package(fmt REQUIRED)
find_package(spdlog REQUIRED)
find_package(CLI11 REQUIRED)
find_package(Catch2 REQUIRED)
find_package(ZLIB REQUIRED)
find_package(MPI REQUIRED COMPONENTS C CXX)
find_package(Boost 1.74 REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
find_package(OpenSSL 3 REQUIRED COMPONENTS Crypto)  # libssl-dev: HMAC for the job secret (security/)
find_package(yaml-cpp REQUIRED)  # Debian's libyaml-cpp-dev: job files (runtime/job/)
find_package(benchmark QUIET)
find_package(PkgConfig REQUIRED)
pkg_check_modules(OPENBLAS REQUIRED IMPORTED_TARGET openblas)
set(BRAID_BLAS_VERSION "${OPENBLAS_VERSION}")

# --- Gloo (Debian's libgloo-dev)
find_package(Gloo QUIET)
braid_resolve_option(GLOO "${Gloo_FOUND}" "Gloo (CMake package 'Gloo', libgloo-dev)")

# --- UCX (Debian's libucx-dev)
pkg_check_modules(UCX QUIET IMPORTED_TARGET ucx)
braid_resolve_option(UCX "${UCX_FOUND}" "UCX (pkg-config 'ucx', libucx-dev)")

# --- Intel ISA-L (Debian's libisal-dev): CRC-32 with carry-less multiplication for the checksums of
# checkpoint files and of tensors on the wire (base/crc32.h); zlib's slower crc32 without it.
find_path(ISAL_INCLUDE_DIR isa-l/crc.h)
find_library(ISAL_LIBRARY isal)
set(_isal_found FALSE)
if(ISAL_INCLUDE_DIR AND ISAL_LIBRARY)
  set(_isal_found TRUE)
endif()
braid_resolve_option(ISAL "${_isal_found}" "Intel ISA-L (isa-l/crc.h and libisal, libisal-dev)")

# --- CUDA toolkit and NCCL in BRAID_CUDA_HOME
set(_cuda_found FALSE)
if(NOT BRAID_WITH_CUDA STREQUAL "OFF" AND EXISTS "${BRAID_CUDA_HOME}/bin/nvcc")
  set(CUDAToolkit_ROOT "${BRAID_CUDA_HOME}")
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND)
    set(_cuda_found TRUE)
  endif()
endif()
braid_resolve_option(CUDA "${_cuda_found}" "the CUDA toolkit (nvcc in ${BRAID_CUDA_HOME}/bin)")
if(BRAID_HAVE_CUDA)
  set(BRAID_NVCC "${BRAID_CUDA_HOME}/bin/nvcc")
  set(BRAID_CUDA_ARCHS "80;90" CACHE STRING "GPU architectures the CUDA kernels are compiled for")
endif()

# Compiles .cu files with nvcc directly into object files appended to OUT_VAR. CMake 3.25 cannot ask nvcc
# for C++20 through compile features, so braid drives nvcc itself; the kernels include only plain headers
# (no fmt/spdlog), see tensor/cuda/launch.h.
function(braid_nvcc_objects out_var)
  set(_objs)
  set(_gencode)
  foreach(_a ${BRAID_CUDA_ARCHS})
    list(APPEND _gencode "-gencode=arch=compute_${_a},code=sm_${_a}")
  endforeach()
  foreach(_src ${ARGN})
    get_filename_component(_abs "${_src}" ABSOLUTE)
    get_filename_component(_name "${_src}" NAME_WE)
    set(_obj "${CMAKE_CURRENT_BINARY_DIR}/${_name}.cu.o")
    add_custom_command(
      OUTPUT "${_obj}"
      COMMAND "${BRAID_NVCC}" -std=c++20 -O3 -Xcompiler=-fPIC --expt-relaxed-constexpr ${_gencode}
              -I${PROJECT_SOURCE_DIR} -MD -MF "${_obj}.d" -c "${_abs}" -o "${_obj}"
      DEPENDS "${_abs}"
      DEPFILE "${_obj}.d"
      COMMENT "nvcc ${_src}"
      VERBATIM)
    list(APPEND _objs "${_obj}")
  endforeach()
  set(${out_var} ${_objs} PARENT_SCOPE)
endfunction()

set(_nccl_found FALSE)
if(BRAID_HAVE_CUDA)
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS "${BRAID_CUDA_HOME}/include")
  find_library(NCCL_LIBRARY nccl HINTS "${BRAID_CUDA_HOME}/lib64" "${BRAID_CUDA_HOME}/lib")
  if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    set(_nccl_found TRUE)
    add_library(braid_nccl_lib INTERFACE)
    target_include_directories(braid_nccl_lib SYSTEM INTERFACE "${NCCL_INCLUDE_DIR}")
    target_link_libraries(braid_nccl_lib INTERFACE "${NCCL_LIBRARY}" CUDA::cudart)
  endif()
endif()
braid_resolve_option(NCCL "${_nccl_found}" "NCCL (nccl.h and libnccl in ${BRAID_CUDA_HOME}, needs CUDA)")

function(braid_print_summary)
  message(STATUS "")
  message(STATUS "braid ${PROJECT_VERSION} configuration")
  message(STATUS "  build type        ${CMAKE_BUILD_TYPE}")
  message(STATUS "  sanitizers        ${BRAID_SANITIZE}")
  message(STATUS "  CUDA              ${BRAID_HAVE_CUDA} (option ${BRAID_WITH_CUDA})")
  message(STATUS "  NCCL              ${BRAID_HAVE_NCCL} (option ${BRAID_WITH_NCCL})")
  message(STATUS "  UCX               ${BRAID_HAVE_UCX} (option ${BRAID_WITH_UCX})")
  message(STATUS "  Gloo              ${BRAID_HAVE_GLOO} (option ${BRAID_WITH_GLOO})")
  message(STATUS "  ISA-L (CRC-32)    ${BRAID_HAVE_ISAL} (option ${BRAID_WITH_ISAL})")
  message(STATUS "  MPI               ${MPI_C_LIBRARY_VERSION_STRING}")
  message(STATUS "  BLAS              OpenBLAS ${BRAID_BLAS_VERSION}")
  message(STATUS "")
endfunction()
