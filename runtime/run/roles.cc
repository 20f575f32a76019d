#include "runtime/run/roles.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/check.h"

namespace braid::runtime {

std::string_view role_name(Role role) {
  switch (role) {
    case Role::Master: return "master";
    case Role::Trainer: return "trainer";
    case Role::Worker: return "worker";
  }
  return "unknown";
}

Role role_of(const JobSpec& job, int rank) {
  if (job.roles.master && *job.roles.master == rank) return Role::Master;
  if (trainer_index(job, rank) >= 0) return Role::Trainer;
  const auto& w = job.roles.workers;
  if (std::find(w.begin(), w.end(), rank) != w.end()) return Role::Worker;
  BRAID_THROW(InvalidArgument, "{}: roles: no role names rank {} (the job's roles cover {} ranks)",
              job.file.empty() ? job.name : job.file, rank, job.roles.world_size());
}

int driver_rank(const JobSpec& job) {
  BRAID_CHECK_ARG(!job.roles.trainers.empty(), "{}: roles: the job has no trainer", job.file);
  return job.roles.master ? *job.roles.master : job.roles.trainers.front();
}

int trainer_index(const JobSpec& job, int rank) {
  const auto& t = job.roles.trainers;
  const auto it = std::find(t.begin(), t.end(), rank);
  return it == t.end() ? -1 : static_cast<int>(it - t.begin());
}

std::string worker_name(int rank) { return fmt::format("worker{}", rank); }

std::string describe_rank(const JobSpec& job, int rank) {
  std::string role;
  try {
    role = std::string(role_name(role_of(job, rank)));
  } catch (const InvalidArgument&) {
    role = "no role";
  }
  if (rank == driver_rank(job) && role != "master") role += ", the driver";
  return fmt::format("rank {} ({})", rank, role);
}

}  // namespace braid::runtime
