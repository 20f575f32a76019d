#include "runtime/run/job_runtime.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <mutex>

#include "base/env.h"
#include "base/fault_injection.h"
#include "base/logging.h"
#include "collectives/queue/flight_recorder.h"
#include "collectives/registry/group_registry.h"
#include "collectives/mpi/mpi_bootstrap.h"
#include "rpc/api.h"
#include "runtime/network_env.h"
#include "runtime/run/rank_device.h"
#include "runtime/run/rank_service.h"
#include "store/rendezvous.h"

namespace braid::runtime {

namespace {

std::chrono::milliseconds seconds_to_ms(double s) { return std::chrono::milliseconds(static_cast<int64_t>(s * 1000)); }

// RPC threads: every rank serves the driver's pings and aborts while its trainer (or a worker's remote
// forwards) may hold several threads in long calls, so there are more than the agent's default.
constexpr int kRpcThreads = 16;

std::mutex g_mu;
std::shared_ptr<collectives::ProcessGroup> g_trainers;  // GUARDED_BY(g_mu)
HybridShardGroups g_hybrid;                             // GUARDED_BY(g_mu)
Device g_device = Device::cpu();                        // GUARDED_BY(g_mu)

void set_process_device(Device device) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_device = device;
}

void set_process_trainers_group(std::shared_ptr<collectives::ProcessGroup> group) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_trainers = std::move(group);
}

void set_process_hybrid_shard_groups(HybridShardGroups groups) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_hybrid = std::move(groups);
}

// hybrid_shard over trainers t0..tn-1 with shard groups of s: shard groups are the consecutive blocks
// {t0..ts-1}, {ts..t2s-1}, ...; replicate group i holds the i-th trainer of every block. new_group is
// collective over the default group, so every rank makes all of them, in this order, and keeps its own.
// `options`: the trainers' group's (nccl for CUDA trainers).
HybridShardGroups make_hybrid_shard_groups(const JobSpec& job, int rank, const collectives::NewGroupOptions& options) {
  HybridShardGroups mine;
  if (!job.fsdp.enabled || job.fsdp.sharding_strategy != ShardingStrategy::HybridShard) return mine;
  const std::vector<int>& t = job.roles.trainers;
  const auto s = static_cast<size_t>(job.fsdp.shard_group_size);
  const size_t blocks = t.size() / s;
  for (size_t b = 0; b < blocks; ++b) {
    const std::vector<int> ranks(t.begin() + static_cast<std::ptrdiff_t>(b * s),
                                 t.begin() + static_cast<std::ptrdiff_t>((b + 1) * s));
    auto g = collectives::new_group(ranks, options);
    if (std::find(ranks.begin(), ranks.end(), rank) != ranks.end()) mine.shard = std::move(g);
  }
  for (size_t i = 0; i < s; ++i) {
    std::vector<int> ranks;
    for (size_t b = 0; b < blocks; ++b) ranks.push_back(t[b * s + i]);
    auto g = collectives::new_group(ranks, options);
    if (std::find(ranks.begin(), ranks.end(), rank) != ranks.end()) mine.replicate = std::move(g);
  }
  return mine;
}

}  // namespace

std::shared_ptr<collectives::ProcessGroup> process_trainers_group() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_trainers;
}

Device process_device() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_device;
}

HybridShardGroups process_hybrid_shard_groups() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_hybrid;
}

JobRuntime::JobRuntime(const JobSpec& job, const LaunchEnv& env) : job_(job) {
  BRAID_CHECK_ARG(env.launcher != Launcher::None,
                  "braid run: {} needs {} processes: start it under a launcher (mpirun -np {} braid run {}, srun, "
                  "or braid launch -n {} -- braid run {})",
                  job.file, job.roles.world_size(), job.roles.world_size(), job.file, job.roles.world_size(),
                  job.file);
  check_world_size(job, env.world_size);
  rank_ = env.rank;
  world_size_ = env.world_size;
  role_ = role_of(job, rank_);
  stamp_log_identity(env, role_name(role_));
  // Before any rendezvous: a CUDA role on a host without a GPU is this rank's error, named at once.
  device_ = rank_device(job, role_, rank_, env.local_rank, local_devices());
  set_process_device(device_);

  // The rendezvous waits as long as RPC calls may: the slowest rank to start bounds it.
  const auto timeout = std::max(seconds_to_ms(job.rpc.timeout_s), std::chrono::milliseconds(30'000));
  if (env.launcher == Launcher::OpenMpi && !env::get("MASTER_ADDR")) {
    store_ = collectives::mpi::mpi_bootstrap_store(timeout);
  } else {
    store_ = store::rendezvous("env://", rank_, world_size_, timeout).store;
  }

  // The network of a job that spans machines (BRAID_SOCKET_IFNAME, GLOO_SOCKET_IFNAME; docs/DEPLOY.md):
  // braid's own TCP traffic stays on loopback otherwise.
  const NetworkChoice net = network_from_env();
  collectives::InitOptions init;
  init.group.devices = net.gloo_devices;
  init.store = store_;
  init.rank = rank_;
  init.world_size = world_size_;
  init.group.timeout = timeout;
  if (job.failure.stall_warn_s) {
    init.group.stall_warn = std::chrono::milliseconds(static_cast<int64_t>(*job.failure.stall_warn_s * 1000));
  }
  // Flight-recorder dumps (BRAID_TRACE_DIR wins): beside the job file, as its status file is.
  if (!job.file.empty()) {
    collectives::trace::set_default_dir(
        (std::filesystem::absolute(job.file).parent_path() / ("braid-trace-" + job.name)).string());
  }
  RankService::publish_process(*store_, rank_, device_.str());
  collectives::init_process_group(to_string(world_backend(job)), init);
  RankService::instance().read_processes(*store_, world_size_);  // every rank is in: all are published
  // BRAID_FAULT: every rank is in the default group (so inside braid run, its signals handled), none yet in
  // the trainers' group or RPC.
  fault::point("rendezvous");
  collectives::NewGroupOptions trainer_options;
  if (trainers_backend(job) != world_backend(job)) {
    // Every rank runs the same check on the same table, so all stop together, before NCCL would.
    check_trainer_devices(job, RankService::instance().device_placement());
    trainer_options.backend = to_string(trainers_backend(job));
    trainer_options.pg_options = init.group;
    trainer_options.pg_options->cuda_device = device_.is_cuda() ? device_.index : -1;
  }
  trainers_ = collectives::new_group(job.roles.trainers, trainer_options);
  set_process_trainers_group(trainers_);
  set_process_hybrid_shard_groups(make_hybrid_shard_groups(job, rank_, trainer_options));

  rpc::RpcBackendOptions o;
  o.store = store_;
  o.transport = to_string(job.rpc.transport);
  o.rpc_timeout = rpc::Millis(seconds_to_ms(job.rpc.timeout_s));
  o.num_worker_threads = kRpcThreads;
  if (!net.rpc_bind_host.empty()) o.transport_options.bind_host = net.rpc_bind_host;
  o.join_timeout = timeout;
  // Every rank is done when the job shuts RPC down: one that does not arrive within failure.timeout_s hung.
  o.shutdown_timeout = std::max(seconds_to_ms(job.failure.timeout_s), std::chrono::milliseconds(1000));
  // A peer whose connection breaks is acted on at once (rank_service.h): a dead driver ends this rank.
  o.on_peer_failure = [](int peer, const std::string& reason) { RankService::instance().on_peer_failure(peer, reason); };
  // A rank killed in shutdown may never have talked to this one (two trainers): its process on this host
  // tells, before a launcher ends this rank too (rpc/agent.h).
  o.peer_ended = [](int peer) { return RankService::instance().local_peer_ended(peer); };
  o.on_peers_may_leave = [] { RankService::instance().set_peers_may_leave(); };
  rpc::init_rpc(worker_name(rank_), rank_, world_size_, o);
  rpc_up_ = true;
  // The transport and why, once per job (every rank chose the same, or init_rpc failed naming them).
  const rpc::RpcAgent& agent = rpc::current_agent();
  // "(rpc.transport tcp)" when asked for, "(rpc.transport auto: braid was built with UCX ...)" when chosen.
  const std::string why = agent.transport_reason() == "asked for" ? o.transport : agent.transport_reason();
  logging::get("braid.run")->log(rank_ == 0 ? spdlog::level::info : spdlog::level::debug,
                                 "joined the job: {} ranks, backend {}{}, rpc over {} (rpc.transport {}), device {}",
                                 world_size_, to_string(world_backend(job)),
                                 trainers_backend(job) == world_backend(job)
                                     ? std::string()
                                     : fmt::format(" (trainers over {})", to_string(trainers_backend(job))),
                                 agent.transport_name(), why, device_.str());
  // Once per job, where every rank runs: what an operator checks first on a multi-node job.
  if (is_driver()) logging::get("braid.run")->info("{} ranks on {}", world_size_, RankService::instance().placement());
}

void JobRuntime::shutdown_rpc(bool graceful) {
  if (!rpc_up_) return;
  rpc_up_ = false;
  rpc::shutdown(graceful);
}

JobRuntime::~JobRuntime() {
  try {
    shutdown_rpc(false);
  } catch (const std::exception& e) {
    logging::get("braid.run")->warn("shutting down RPC: {}", e.what());
  }
  set_process_trainers_group(nullptr);
  set_process_hybrid_shard_groups({});
  trainers_.reset();
  try {
    if (collectives::is_initialized()) collectives::destroy_process_group();
  } catch (const std::exception& e) {
    logging::get("braid.run")->warn("destroying the process groups: {}", e.what());
  }
}

}  // namespace braid::runtime
