// The job parser's core, shared by parse_job_text (YAML) and apply_override (the job's own JSON with one
// key replaced): both end in the same checks.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "runtime/job/job_spec.h"

namespace braid::runtime::job_detail {

// Builds and validates a job from its tree. `origin` gives the default name (its stem); relative paths
// are resolved against `base_dir` (absolute, or relative to the current directory). Throws JobError.
// The roles section (job_roles.cc): explicit, disjoint ranks 0..N-1 with at least one trainer.
RolesSpec parse_roles(const nlohmann::json& value);

class Fields;

// The device keys of the top level `top` (job_devices.cc): `device` and `devices` as DevicesSpec; and the
// check that a CUDA-only backend has CUDA trainers.
DevicesSpec parse_devices(const Fields& top);
void check_backend_device(const JobSpec& job);

JobSpec parse_tree(const nlohmann::json& root, const std::string& origin, const std::string& base_dir);

}  // namespace braid::runtime::job_detail
