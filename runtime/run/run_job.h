// `braid run`: what every process of a job does. Blocks the job's signals, joins the job (JobRuntime),
// then drives it (the driver rank) or serves until the driver says stop (every other rank), and leaves in
// order. Returns the exit code; a failed job ends the process with exit code 1 from inside (driver.h,
// rank_service.h).
#pragma once

#include "runtime/job/job_spec.h"
#include "runtime/launch_env.h"
#include "runtime/run/driver.h"

namespace braid::runtime {

// Call before any thread starts (the signal mask is inherited by threads made later).
int run_job(const JobSpec& job, const LaunchEnv& env, const RunOptions& options);

}  // namespace braid::runtime
