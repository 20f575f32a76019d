// Which role a rank plays in a job, and the names the runtime gives ranks: the RPC worker name of rank r
// is "worker<r>" (as braid's tests name them), and messages name a rank as "rank 3 (trainer)".
#pragma once

#include <string>
#include <string_view>

#include "runtime/job/job_spec.h"

namespace braid::runtime {

enum class Role { Master, Trainer, Worker };

std::string_view role_name(Role role);  // "master", "trainer", "worker"
// InvalidArgument naming the rank and the job's file when the roles do not name it.
Role role_of(const JobSpec& job, int rank);
// The rank that drives the job: the master if the job has one, else the first trainer.
int driver_rank(const JobSpec& job);
// The position of `rank` among the job's trainers (0-based); -1 for a rank that is not a trainer.
int trainer_index(const JobSpec& job, int rank);
std::string worker_name(int rank);                     // "worker<rank>"
std::string describe_rank(const JobSpec& job, int rank);  // "rank 3 (trainer)"; the driver says so

}  // namespace braid::runtime
