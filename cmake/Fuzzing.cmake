# Fuzz builds (fuzz/, docs/FUZZING.md): -DBRAID_FUZZ=ON with clang, usually with
# -DBRAID_SANITIZE=address,undefined (`make fuzz` configures build-fuzz so).
#
# Every braid target is compiled with -fsanitize=fuzzer-no-link, so that libFuzzer sees the coverage of
# the decoders in the libraries, not only of the fuzz targets; the fuzz executables themselves link
# -fsanitize=fuzzer (fuzz/CMakeLists.txt). Without BRAID_FUZZ the fuzz targets still build, with any
# compiler, as corpus replays (fuzz/replay_main.cc) that CTest runs.
option(BRAID_FUZZ "Build the libFuzzer targets of fuzz/ (clang only)" OFF)
if(BRAID_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "BRAID_FUZZ=ON needs clang (libFuzzer); this build uses ${CMAKE_CXX_COMPILER_ID}: "
                        "configure with -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang")
  endif()
  string(APPEND CMAKE_CXX_FLAGS " -fsanitize=fuzzer-no-link")
endif()
