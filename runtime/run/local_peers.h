// LocalPeers: the job's processes that run on this host, and what can be seen of them without asking
// them: which are gone, have exited (not reaped yet) or are stopped.
//
// Every rank publishes "host pid" in the job's store at start-up (RankService::publish_process); once every
// rank is in, each reads the table (set()). A launcher that ends a job (mpirun, srun) says nothing of why,
// and a signal handler cannot use the store, so the processes on this host are what a rank can name.
//
// Stops are remembered. A launcher that ends a job around a hung rank continues it (mpirun and braid
// launch send SIGCONT with their SIGTERM), so a rank that looks only after that finds nothing wrong with
// it, while it had been waiting for it all along. Every look records the stopped peers it sees, and a peer
// seen stopped within the memory window is named as such: "rank 2 (worker) was stopped (pid 123): seen
// so for 4.9 s, until 0.2 s ago". The waits that a stopped peer holds up look often (run_job's join
// watchdog, graceful RPC shutdown's barriers through peer_ended()), so the record is fresh where it counts.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace braid::runtime {

class LocalPeers {
 public:
  using Clock = std::chrono::steady_clock;
  // rank -> (host, pid), as published.
  using Table = std::map<int, std::pair<std::string, long>>;
  // Names a rank in messages: "rank 2 (worker)".
  using NameRank = std::function<std::string(int rank)>;

  enum class Filter {
    kFailed,   // gone, exited, stopped, or seen stopped within the memory window
    kDead,     // gone or exited only (a stopped peer may still be continued)
    kStopped,  // stopped, or seen stopped within the memory window
  };

  // gethostname(): what publish_process() writes and looks compare against.
  static std::string this_host();

  // The table read from the store; `self` is left out of every look. Forgets every stop seen before.
  void set(Table table, int self);
  Table table() const;

  // "rank 2 (worker) died (its process, pid 123, is gone); rank 0 (trainer) has exited (pid 122)": the
  // peers on this host that `filter` selects, the gone ones first; "" when none. A stop is remembered
  // for `memory` after it was last seen.
  std::string describe(Filter filter, const NameRank& name, Clock::duration memory);
  // Why `rank`'s process on this host has ended ("rank 1 (trainer) died (its process, pid 123, is gone)"),
  // or "" when it has not, runs elsewhere, or is unknown. Records a stop as every look does.
  std::string ended(int rank, const NameRank& name);

  // For tests: a stop seen at `when`, as a look would record it.
  void record_stop(int rank, Clock::time_point when);

 private:
  struct Sighting {
    Clock::time_point first;
    Clock::time_point last;
  };
  void note_stopped(int rank, Clock::time_point now);  // mu_ held

  mutable std::mutex mu_;
  Table table_;                        // GUARDED_BY(mu_)
  int self_ = -1;                      // GUARDED_BY(mu_)
  std::string host_;                   // GUARDED_BY(mu_): this host's name, read once by set()
  std::map<int, Sighting> stopped_;    // GUARDED_BY(mu_)
};

}  // namespace braid::runtime
