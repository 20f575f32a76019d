#include "runtime/run/run_job.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <optional>
#include <regex>
#include <thread>
#include <vector>

#include "base/check.h"
#include "base/fault_injection.h"
#include "base/logging.h"
#include "rpc/api.h"
#include "runtime/data/split_mix.h"
#include "runtime/models/model_registry.h"
#include "runtime/plugin/plugin_loader.h"
#include "runtime/run/instance_registry.h"
#include "runtime/run/job_runtime.h"
#include "runtime/run/pause_watch.h"
#include "runtime/run/rank_service.h"
#include "runtime/run/signals.h"
#include "runtime/run/trainer.h"
#include "tensor/random.h"

namespace braid::runtime {

namespace {

// "; on this host: rank 2 (worker) is stopped (pid 123)" when a peer here is gone, has exited or is stopped.
std::string on_this_host() {
  const std::string seen = RankService::instance().local_failed_peer();
  return seen.empty() ? "" : "; on this host: " + seen;
}

// Why a launcher is ending the job, when it is because a rank failed; "" when nothing says so (a stop an
// operator asked for). Every source is named, since none alone tells the first failure: `braid launch`
// writes "rank R killed by SIGKILL" to BRAID_LAUNCH_NOTICE before its SIGTERM (the first rank to end, which
// may be one that gave up on a hung peer); RPC knows the ranks whose connections broke; and the processes
// on this host show which ranks are gone or stopped (mpirun and srun say nothing).
std::string failure_behind_signal(const JobSpec& job, int self) {
  RankService& service = RankService::instance();
  std::vector<std::string> parts;
  // braid launch writes a notice only when a rank failed, in any phase of the job.
  if (const char* path = std::getenv("BRAID_LAUNCH_NOTICE"); path != nullptr && *path != 0) {
    std::ifstream in(path);
    std::string line;
    std::smatch m;
    static const std::regex notice_re("rank ([0-9]+) (.*)");
    if (std::getline(in, line) && std::regex_match(line, m, notice_re)) {
      // The digits may not fit an int (a corrupt notice): such a rank names nobody.
      int rank = -1;
      const std::string digits = m[1].str();
      std::from_chars(digits.data(), digits.data() + digits.size(), rank);
      if (rank >= 0 && rank < job.roles.world_size() && rank != self) {
        parts.push_back(fmt::format("braid launch reports that {} failed: {}", describe_rank(job, rank), m[2].str()));
      }
    }
  }
  // Once this rank's RPC shutdown is at its last barrier, peers leave the job as it ends normally: one
  // that is gone then is no sign of a failure, but a stopped one is (none stops in a normal ending; the
  // launcher ends the job around the hung one). Before that barrier no peer can have left normally.
  if (service.job_ending() && service.peers_may_have_left()) {
    if (std::string stopped = service.local_stopped_peers(); !stopped.empty()) parts.push_back(stopped);
    return parts.empty() ? "" : fmt::format("the job was ending, but {}", fmt::join(parts, "; "));
  }
  for (const auto& [rank, why] : RankService::instance().dead_peers()) {
    if (rank != self) parts.push_back(fmt::format("{} died ({})", describe_rank(job, rank), why));
  }
  // Before RPC knows anyone (the rendezvous), or for a peer it never talked to: a process on this host.
  if (std::string local = RankService::instance().local_failed_peer(); !local.empty()) parts.push_back(local);
  // Continued after a stop (mpirun sends SIGCONT with its SIGTERM), a rank finds peers that gave up on it:
  // the hang was its own. Only beside a failure: a starved rank that gets an operator's SIGTERM still stops
  // cleanly.
  if (std::string paused = PauseWatch::describe_recent(PauseWatch::window_for(job.failure.timeout_s));
      !paused.empty() && !parts.empty()) {
    parts.insert(parts.begin(), fmt::format("{} hung: {}", describe_rank(job, self), paused));
  }
  return fmt::format("{}", fmt::join(parts, "; "));
}

// Watches the job's processes on this host for the life of the rank, in two modes.
// Joining: once every rank is in the default group, the rest of joining (the trainers' group, RPC) takes
// moments; a rank still joining failure.timeout_s later waits for a peer that hangs (a stopped process),
// which nothing else would find before the rendezvous timeout (30 s or more). It names what it can see.
// A peer on this host whose process is gone or has exited cannot join any more: that is acted on at the
// next tick, before a launcher (mpirun, srun) ends the job over the dead rank and, as mpirun does, drops
// what the ranks it ends write as they go.
// Joined: it looks every kSampleTick (500 ms), so that a peer stopped while this rank waits on it
// somewhere that looks at no process (a call to it, the store) is remembered after a launcher continues it
// (local_peers.h); a stop that hangs the job lasts failure.timeout_s (1 s at least): it is seen. As the job
// ends (until this rank is at RPC shutdown's last barrier) it looks every kJoinTick and acts on a dead peer.
class PeerWatch {
 public:
  explicit PeerWatch(const JobSpec& job) : job_(job), thread_([this] { run(); }) {}
  ~PeerWatch() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  PeerWatch(const PeerWatch&) = delete;
  PeerWatch& operator=(const PeerWatch&) = delete;

  // This rank has joined: no more aborts, only looks.
  void joined() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      joined_ = true;
    }
    cv_.notify_all();
  }

 private:
  void run() {
    const auto limit = std::chrono::milliseconds(static_cast<int64_t>(job_.failure.timeout_s * 1000));
    std::unique_lock<std::mutex> lock(mu_);
    while (!joined_) {
      // Every rank wakes at its limit itself, not at its next tick after it: the ranks were in the default
      // group within moments of each other, so each names the hung peer before the first to give up ends
      // the job (a launcher then continues the stopped rank, and ends the others before they look).
      const auto since = RankService::instance().in_default_group_since();
      auto wake = std::chrono::steady_clock::now() + kJoinTick;
      if (since) wake = std::min(wake, *since + limit);
      if (cv_.wait_until(lock, wake, [this] { return stop_ || joined_; })) break;
      if (!since) continue;
      if (!RankService::instance().local_failed_peer(/*dead_only=*/true).empty()) {
        // Every failed peer, the stopped ones too: a peer that exited may have given up on a stopped one.
        lock.unlock();
        RankService::instance().abort_process(
            fmt::format("joining the job: {}; exiting", RankService::instance().local_failed_peer()));
      }
      if (std::chrono::steady_clock::now() - *since < limit) continue;
      lock.unlock();
      const std::string seen = RankService::instance().local_failed_peer();
      RankService::instance().abort_process(fmt::format(
          "joining the job: the trainers' group and RPC are not up {:g} s (failure.timeout_s) after every rank was "
          "in the default group: {}; exiting", job_.failure.timeout_s, seen.empty() ? "a rank hangs" : seen));
    }
    for (;;) {
      RankService& service = RankService::instance();
      const bool ending = service.job_ending() && !service.peers_may_have_left();
      if (cv_.wait_for(lock, ending ? kJoinTick : kSampleTick, [this] { return stop_; })) return;
      lock.unlock();
      // The look records stops. As the job ends, no peer leaves before this rank is at RPC shutdown's last
      // barrier: one whose process ended died, and a launcher (mpirun) may end this rank within moments of
      // the death. A peer that talked to this rank over RPC is found by its broken connection, this one
      // perhaps never did (two trainers).
      const std::string dead = service.local_failed_peer(/*dead_only=*/true);
      if (ending && !dead.empty() && !service.peers_may_have_left()) {
        service.abort_process(fmt::format("the job was ending: {}; exiting", service.local_failed_peer()));
      }
      lock.lock();
    }
  }

  // How often a joining or ending rank looks for a peer on this host that is gone or has exited (one read
  // of /proc per peer), and how often a joined one looks for stopped peers.
  static constexpr std::chrono::milliseconds kJoinTick{100};
  // 500 ms: a rank reads /proc once per peer on its host each look, so a host of 64 ranks makes 64 x 64
  // reads a look; a stop that hangs the job lasts failure.timeout_s (1 s at least) and is still seen.
  static constexpr std::chrono::milliseconds kSampleTick{500};

  const JobSpec& job_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;    // GUARDED_BY(mu_)
  bool joined_ = false;  // GUARDED_BY(mu_)
  std::thread thread_;
};

}  // namespace

int run_job(const JobSpec& job, const LaunchEnv& env, const RunOptions& options) {
  block_job_signals();
  fault::arm(env.rank, env.restart_count);  // BRAID_FAULT (base/fault_injection.h): off unless set
  // Dropout draws from the default generator: each rank its own stream of train.seed, which a checkpoint
  // saves and a resume restores (resume_state.h).
  manual_seed(data::SplitMix64(job.train.seed, static_cast<uint64_t>(env.rank)).next_u64());
  // Plugins first, on every rank and before anything starts: a library that cannot load stops this rank
  // with its reason before it joins the job, and the launcher ends the others.
  load_job_plugins(job);
  // The model is checked before anything starts; looking it up also registers the built-in module classes,
  // which must happen before the RPC agent starts: the driver creates the remote parts on the workers as
  // soon as everyone has joined.
  validate_job_model(job);
  BRAID_CHECK_ARG(!options.resume || !job.checkpoint.dir.empty(),
                  "--resume: {} sets no checkpoint.dir (give one with --set checkpoint.dir=DIR)", job.file);
  RankService::instance().configure(job, env.rank);
  register_rank_functions();
  register_instance_functions();
  register_trainer_class([&job]() -> const JobSpec& { return job; }, [] { return process_trainers_group(); });

  const int driver = driver_rank(job);
  const bool is_driver = env.rank == driver;
  std::atomic<bool> joined{false};
  // A signal anywhere becomes a stop request on the driver, which checkpoints and stops every rank;
  // unless the signal comes from a launcher ending a job that lost a rank (below), or comes before this
  // rank has joined (nothing to checkpoint: it leaves at once rather than wait out the rendezvous).
  SignalWatcher signals([&](int signo) {
    const std::string name = signal_name(signo);
    if (const std::string why = failure_behind_signal(job, env.rank); !why.empty()) {
      RankService::instance().abort_process(fmt::format("got {}: {}; exiting", name, why));
    }
    if (!joined.load()) {
      RankService::instance().abort_process(fmt::format("got {} while joining the job (a launcher ends a job when "
                                                        "a rank fails; it names the rank); exiting", name));
    }
    // The job is past its last checkpoint and leaving already (bounded by failure.timeout_s): nothing to ask.
    if (RankService::instance().job_ending()) {
      logging::get("braid.run")->warn("got {} while the job is ending: it ends on its own", name);
      return;
    }
    logging::get("braid.run")->warn("got {}: asking the driver to checkpoint and stop", name);
    if (is_driver) {
      RankService::instance().request_driver_stop(name);
      return;
    }
    rpc::rpc_async(worker_name(driver), "braid.signal", {rpc::Value(name)}, rpc::Millis(5000))
        .wait(std::chrono::milliseconds(6000));
  });

  // A rank continued after a stop must know it was the one that hung (pause_watch.h).
  PauseWatch pause_watch;
  PeerWatch peer_watch(job);
  // A peer that fails while this rank joins often shows first as a broken store connection (rank 0's
  // watchdog ended its process, and the store with it): name the peers this host sees failed beside it.
  std::optional<JobRuntime> joining;
  try {
    joining.emplace(job, env);
  } catch (const std::exception& e) {
    if (const std::string seen = RankService::instance().local_failed_peer(); !seen.empty()) {
      RankService::instance().abort_process(fmt::format("joining the job failed: {}; {}; exiting", e.what(), seen));
    }
    throw;
  }
  JobRuntime& runtime = *joining;
  joined.store(true);
  peer_watch.joined();

  if (runtime.is_driver()) {
    Driver d(job, runtime, options);
    d.run();
  } else {
    const std::string message = RankService::instance().serve_until_stop();
    if (message.rfind("stopping", 0) == 0) {
      logging::get("braid.run")->warn("{}", message);
    } else {
      logging::get("braid.run")->debug("{}", message);
    }
  }
  clear_instances();  // their RRefs go before the agent does
  fault::point("shutdown");  // stopped, about to leave the job (BRAID_FAULT)
  try {
    runtime.shutdown_rpc(/*graceful=*/true);
  } catch (const TimeoutError& e) {
    // A rank hung while the job ended (RPC names workers, the job names ranks). The process ends here,
    // without unwinding into the groups of a job that lost a rank.
    RankService::instance().abort_process(
        fmt::format("the job's RPC shutdown failed: {}{}", name_workers(job, e.what()), on_this_host()));
  } catch (const std::exception& e) {
    // A rank died while the job ended: RPC names those it knows dead; when the store's host died, the
    // store's error does not, so the ranks whose connections broke are named too. A peer that hangs (a
    // stopped process) breaks no connection: the processes on this host name it.
    std::string dead;
    for (const auto& [r, why] : RankService::instance().dead_peers()) {
      dead += fmt::format("{}{} is gone ({})", dead.empty() ? "" : "; ", describe_rank(job, r), why);
    }
    RankService::instance().abort_process(fmt::format("the job's RPC shutdown failed{}: {}{}",
                                                       dead.empty() ? "" : ": " + dead, name_workers(job, e.what()),
                                                       on_this_host()));
  }
  return 0;
}

}  // namespace braid::runtime
