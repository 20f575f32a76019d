// What every rank of a job serves besides its role's objects, and how a rank that does not drive waits:
// the process-wide RankService and the RPC functions the driver calls on every rank.
//
//   "braid.ping"          () -> {"rank", "role", "state", "step"}: the driver's heartbeat
//   "braid.stop"          (message) : the job is over; serve_until_stop() returns the message to log
//   "braid.abort"         (why)     : another rank failed; this process logs why and exits 1 at once
//   "braid.signal"        (name)    : (to the driver) a rank got SIGTERM/SIGUSR1/SIGINT: checkpoint and stop
//   "braid.save_modules"  (path, [(name, module RRef)]) : a worker saves its hosted modules' state
//   "braid.load_modules"  (path, [(name, module RRef)]) : and loads it back (--resume)
//                         (both only inside checkpoint.dir: checkpoint_file below)
//
// Ranks other than the driver wait in serve_until_stop(), which is also their watchdog: when the driver
// has not been heard from (any call from it counts) for failure.timeout_s, the rank exits 1 naming it.
// A driver that dies is acted on at once: RPC reports the broken connection (on_peer_failure), and a rank
// that has not been told to stop exits 1 naming it ("rank 5 (master) died: ..."), under any launcher; so
// does any peer's death as the job ends, until this rank is at RPC shutdown's last barrier. On
// the driver, the same report goes to the Driver (set_peer_failure_listener), which fails the job. The
// same loop sweeps distributed-autograd contexts older than failure.context_ttl_s: contexts a trainer that
// died left on this rank, which nothing else would release.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <vector>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "runtime/job/job_spec.h"
#include "runtime/run/local_peers.h"
#include "store/store.h"

namespace braid::runtime {

struct RankStatus {
  int rank = -1;
  std::string role;
  std::string state;  // starting, serving, training, checkpointing, stopping, stopped
  int64_t step = 0;
};

class RankService {
 public:
  static RankService& instance();

  // Before the RPC agent starts (calls may arrive as soon as it does).
  void configure(const JobSpec& job, int rank);
  // The driver was heard from.
  void touch();
  // Blocks until "braid.stop" arrives and returns its message. Exits the process (1) when the driver is
  // silent for failure.timeout_s.
  std::string serve_until_stop();
  void request_stop(std::string message);

  // Logs `why`, flushes the logs and ends the process with exit code 1 without unwinding: this rank may be
  // blocked in a collective with a dead peer, or in an RPC to it, and nothing would wake those threads in
  // time; destructors of the groups and of the agent would wait on them too.
  [[noreturn]] void abort_process(const std::string& why);

  // What "braid.ping" reports.
  void set_status(std::string state, int64_t step);
  RankStatus status() const;
  // On the driver: a stop asked for by a signal (here or on another rank). The first request wins and stays
  // set (the driver stops at its first sight of it, so it is never read twice).
  void request_driver_stop(std::string signal_name);
  std::optional<std::string> take_driver_stop();

  // `path` resolved and confined to the job's checkpoint.dir (confined_path.h), for what an RPC asks to
  // write or read (braid.save_modules, braid.load_modules, a trainer's save and load): the caller chooses
  // the path, so it is followed only inside the job's own directory. InvalidArgument naming `what`.
  std::string checkpoint_file(const std::string& path, std::string_view what) const;

  // RPC lost `peer` (its connection broke, or it cannot be reached): recorded, then handed to the
  // listener when one is set (the driver), else this process ends naming it when `peer` is the driver and
  // no stop has arrived, or when the job is ending and this rank is not yet at RPC shutdown's last barrier
  // (no peer leaves before it). Runs on an RPC transport thread: nothing here blocks.
  void on_peer_failure(int peer, const std::string& reason);
  // Whether the job is ending normally: this rank got "braid.stop", or (the driver) is stopping. Peers
  // that close their connections then are leaving, not dying, once peers_may_have_left().
  bool job_ending() const;
  // This rank's RPC shutdown has arrived at its last barrier (rpc::RpcAgentOptions::on_peers_may_leave):
  // only from then on may a peer leave the job normally. Before it, a peer whose connection broke or
  // whose process ended has died, even in a job that is ending.
  void set_peers_may_leave();
  bool peers_may_have_left() const;
  // The peers RPC lost (rank -> reason), in rank order.
  std::map<int, std::string> dead_peers() const;
  // The driver's: called (on a transport thread, must not block) for every peer failure; empty clears it.
  void set_peer_failure_listener(std::function<void(int peer, const std::string& reason)> listener);

  // Where each rank's process runs ("host pid device"): every rank publishes its own in the job's store at
  // start-up, and reads them all once every rank is in (after the default group), so that it can tell
  // which peer on its own host is gone or stopped when a launcher ends the job without saying why
  // (mpirun, srun); a signal handler cannot use the store, which the main thread may be blocked in.
  // `device` is where the rank computes ("cpu", "cuda:1"): the driver places remote parts on their
  // worker's device, and the trainers' NCCL group is checked for two trainers on one device.
  static void publish_process(store::Store& store, int rank, const std::string& device = "cpu");
  void read_processes(store::Store& store, int world_size);
  // From read_processes(): rank -> "host cuda:0" style placement, and one rank's device ("cpu" when
  // unknown).
  std::map<int, std::string> device_placement() const;
  std::string device_of(int rank) const;
  // When read_processes() ran: every rank was in the default group then (run_job's PeerWatch).
  std::optional<std::chrono::steady_clock::time_point> in_default_group_since() const;
  // "rank 2 (worker) died (its process, pid 123, is gone); rank 0 (trainer) has exited (pid 122)": the
  // other ranks on this host whose process is gone, has exited or is stopped, or was seen stopped lately
  // (local_peers.h: a launcher continues the hung rank it ends the job around); "" when none is. With
  // `dead_only`, only the gone and exited ones (a stopped peer may still be continued).
  std::string local_failed_peer(bool dead_only = false);
  // "rank 2 (worker) is stopped (pid 123)": the other ranks on this host that are stopped or were seen
  // stopped lately; "" when none is. Ranks leave a job that ends normally, but none stops.
  std::string local_stopped_peers();
  // Why `rank`'s process on this host has ended, or "" (graceful RPC shutdown asks it of the workers its
  // barriers miss: rpc::RpcAgentOptions::peer_ended).
  std::string local_peer_ended(int rank);
  // Where the ranks run, from read_processes(): "2 hosts (bh1: ranks 0-1; bh2: ranks 2-3)", or
  // "1 host (vm)"; ranks in runs.
  std::string placement() const;

  // Releases contexts older than `ttl`; returns how many (also called by the serve loop).
  static size_t sweep_contexts(std::chrono::steady_clock::duration ttl);

 private:
  RankService() = default;

  std::string local_peers(LocalPeers::Filter filter);
  const JobSpec* job() const;  // nullptr before configure()

  mutable std::mutex mu_;
  std::condition_variable cv_;
  const JobSpec* job_ = nullptr;  // GUARDED_BY(mu_)
  int rank_ = -1;                 // GUARDED_BY(mu_)
  std::chrono::steady_clock::time_point last_contact_ = std::chrono::steady_clock::now();  // GUARDED_BY(mu_)
  std::optional<std::string> stop_message_;  // GUARDED_BY(mu_)
  std::optional<std::string> driver_stop_;   // GUARDED_BY(mu_)
  std::string state_ = "starting";          // GUARDED_BY(mu_)
  bool ending_ = false;  // GUARDED_BY(mu_): set_status saw "stopping" or "stopped" (job_ending)
  bool peers_may_leave_ = false;  // GUARDED_BY(mu_)
  int64_t step_ = 0;                        // GUARDED_BY(mu_)
  std::map<int, std::string> dead_;          // GUARDED_BY(mu_)
  LocalPeers peers_;  // its own lock
  std::map<int, std::string> devices_;  // GUARDED_BY(mu_): rank -> device, from read_processes()
  std::optional<std::chrono::steady_clock::time_point> in_group_since_;  // GUARDED_BY(mu_)
  std::mutex listener_mu_;  // taken before mu_, never after
  std::function<void(int, const std::string&)> peer_listener_;  // GUARDED_BY(listener_mu_)
};

// `text` with every RPC worker name "worker<r>" followed by the rank's description, "worker3 (rank 3
// (trainer))": RPC's errors name workers, a job's messages name ranks and roles.
std::string name_workers(const JobSpec& job, const std::string& text);

// Registers the functions above in rpc::global_registry() (once per process).
void register_rank_functions();

}  // namespace braid::runtime
