// Creating a process group by backend name ("mpi", "gloo", "nccl"): the one place that knows every engine.
// It builds the named network engine and, for CPU engines on groups with a store and more than one rank,
// the shared-memory engine (shm/), and composes them into an EngineProcessGroup with the engine policy
// (queue/engine_policy.h) resolved from the options and the environment. This target links every engine
// that was built (BRAID_HAVE_*), so callers (the group registry, tests, benchmarks, the runtime) need no
// engine headers. Engines that were not built give an error that says so and how to enable them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "collectives/core/backend_options.h"
#include "collectives/core/process_group.h"

namespace braid::collectives {

std::shared_ptr<ProcessGroup> create_process_group(const std::string& backend, const BackendOptions& options);
// The backends built into this binary, e.g. {"gloo", "mpi", "nccl"}.
std::vector<std::string> available_backends();
bool backend_available(const std::string& backend);

}  // namespace braid::collectives
