# Project warnings, applied to every braid target through the braid_warnings INTERFACE target.
add_library(braid_warnings INTERFACE)
target_compile_options(braid_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow=local -Wnon-virtual-dtor
    -Wcast-align -Wunused -Woverloaded-virtual -Wimplicit-fallthrough>)
if(BRAID_WERROR)
  target_compile_options(braid_warnings INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
endif()
