// What this build of braid contains and what it can see on this machine: the versions of every backend
// library it was built with (asked of the library at run time where the library can say), and the CPU
// and CUDA devices visible to this process. Lives in runtime because only runtime may link every
// backend; the cli prints it (`braid info`).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace braid::runtime {

// One backend library: CUDA, NCCL, MPI, UCX, Gloo or BLAS.
struct Component {
  std::string name;
  bool built = false;  // compiled into this build (BRAID_WITH_<name> resolved to on)
  // Ordered details, e.g. {"runtime", "12.8"}, {"driver", "no driver"}. For a component that is not
  // built, a single {"why", ...} entry naming the CMake option.
  std::vector<std::pair<std::string, std::string>> details;
};

struct Devices {
  int cpu_cores_online = 0;  // cores the machine has online
  int cpu_cores_usable = 0;  // cores this process may run on (its affinity mask, e.g. under srun)
  std::vector<std::string> cuda_devices;  // device names by ordinal
  std::string cuda_unavailable;           // why no CUDA device is usable; empty when some are
};

struct BuildInfo {
  std::string version;     // "0.1.0"
  std::string build_type;  // "RelWithDebInfo"
  std::string compiler;    // "GNU 12.2.0"
  std::string sanitizers;  // "address,undefined", or "none"
  std::vector<Component> components;
  Devices devices;
};

// Gathers everything above. Safe before MPI_Init and without a GPU or CUDA driver: a library that fails to
// answer shows up as a detail saying so, never as an exception.
BuildInfo gather_build_info();

// "braid 0.1.0 (RelWithDebInfo)", the --version line.
std::string version_line();

}  // namespace braid::runtime
