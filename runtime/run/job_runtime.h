// JobRuntime: what every process of a `braid run` job stands on, built in order and torn down in reverse.
//
//   1. the job's store: from MPI under mpirun (unless MASTER_ADDR says otherwise), else env://
//      (MASTER_ADDR/MASTER_PORT; `braid launch` and Slurm jobs set them);
//   0. this rank's device (rank_device.h): a CUDA role on a host without a GPU stops here;
//   2. the default process group over every rank, with world_backend(job) (never nccl: the CPU roles use it);
//   3. the trainers' group (collectives::new_group(trainers), made by every rank in the same order) with
//      trainers_backend(job), nccl for CUDA trainers, each on its own device; and for
//      FSDP's hybrid_shard the shard and replicate groups of fsdp.shard_group_size;
//   4. the RPC agent, this process being "worker<rank>" (roles.h), over the job's transport.
// The destructor shuts RPC down (gracefully only when shutdown(true) was asked for: a failed job must not
// wait for peers that are gone), then destroys the groups.
#pragma once

#include <memory>

#include "collectives/core/process_group.h"
#include "runtime/job/job_spec.h"
#include "runtime/launch_env.h"
#include "runtime/run/roles.h"
#include "tensor/device.h"
#include "runtime/run/train_options.h"

namespace braid::store {
class Store;
}  // namespace braid::store

namespace braid::runtime {

// The trainers' group of this process's JobRuntime (null when none runs): for objects that RPC creates
// here, such as the Trainer. Set before the RPC agent starts.
std::shared_ptr<collectives::ProcessGroup> process_trainers_group();
// Where this process computes (its role's device in the job; the CPU when no JobRuntime runs).
Device process_device();
// The hybrid_shard groups of this process's trainer (both null unless the job shards with hybrid_shard).
HybridShardGroups process_hybrid_shard_groups();

class JobRuntime {
 public:
  // Checks the job's roles against the launcher's world size first (InvalidArgument, nothing started).
  JobRuntime(const JobSpec& job, const LaunchEnv& env);
  ~JobRuntime();
  JobRuntime(const JobRuntime&) = delete;
  JobRuntime& operator=(const JobRuntime&) = delete;

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  Role role() const { return role_; }
  const Device& device() const { return device_; }
  bool is_driver() const { return rank_ == driver_rank(job_); }
  // The trainers' group; a non-member handle on ranks that are not trainers.
  const std::shared_ptr<collectives::ProcessGroup>& trainers_group() const { return trainers_; }
  const std::shared_ptr<store::Store>& store() const { return store_; }

  // Ends RPC now: graceful waits for every other rank to shut down too (the normal end of a job).
  void shutdown_rpc(bool graceful);

 private:
  const JobSpec& job_;
  int rank_ = 0;
  int world_size_ = 1;
  Role role_ = Role::Trainer;
  Device device_ = Device::cpu();
  std::shared_ptr<store::Store> store_;
  std::shared_ptr<collectives::ProcessGroup> trainers_;
  bool rpc_up_ = false;
};

}  // namespace braid::runtime
