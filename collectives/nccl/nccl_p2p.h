// NcclP2P: send/recv of one NCCL group. NCCL has no tags and no any-source receive; it matches sends and
// receives between two ranks in the order they are issued. So:
//   * every pair of ranks that talks gets its own two-rank communicator and its own stream, created the
//     first time the pair exchanges a message (the lower rank publishes the NCCL id under
//     "nccl/p2p/<lo>-<hi>" in the group's store). A receive that waits for its sender then blocks only
//     its pair's stream, never traffic with other ranks or the group's collectives;
//   * messages between two ranks match in posting order whatever their tags (torch's NCCL backend does
//     the same); any-source receives are refused by ProcessGroupNCCL before they get here.
//
// post() only queues. One completion thread per group does everything that may wait: setting up pair
// communicators (without blocking: the id is polled in the store, NCCL init is non-blocking, so a ring
// where every rank first receives from its left neighbour cannot deadlock), issuing ncclSend/ncclRecv
// after the default stream's pending work (where the buffer was produced), and polling each op's CUDA
// event. An op that passes its deadline fails with TimeoutError; its pair communicator is then aborted
// (by the watchdog) and the pair is broken: its other ops fail with CommError, and so do later ones.
//
// Thread-safety: post() may be called from any thread.
#pragma once

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "collectives/nccl/nccl_watchdog.h"
#include "collectives/work.h"
#include "store/store.h"

namespace braid::collectives::nccl {

class NcclP2P {
 public:
  struct Config {
    int rank = 0;
    int size = 1;
    int device = 0;
    std::string group;                     // the group's name, for communicator names and messages
    std::shared_ptr<store::Store> store;   // the group's store (required when size > 1)
    std::shared_ptr<NcclWatchdog> watchdog;
  };

  explicit NcclP2P(Config config);
  // Fails every op that has not completed with CommError ("the group was destroyed"), aborts the pair
  // communicators that still had ops in flight, destroys the others and joins the thread.
  ~NcclP2P();
  NcclP2P(const NcclP2P&) = delete;
  NcclP2P& operator=(const NcclP2P&) = delete;

  // Queues a send (or recv) of `buffer` (contiguous, on the group's device) to (from) `peer`; `work`
  // completes when the data has left (arrived), or fails after `timeout`. Never blocks.
  void post(bool is_send, const Tensor& buffer, int peer, Millis timeout, std::shared_ptr<Work> work);

 private:
  struct Op;
  struct Pair;

  void loop();
  // Moves one pair forward as far as it can without waiting; returns whether anything changed.
  bool advance(Pair& pair);
  void set_up(Pair& pair);
  void issue(Pair& pair);
  bool complete_finished(Pair& pair);
  void check_deadlines(Pair& pair);
  // Fails the pair's ops (the first with `error`, the rest with CommError naming it), aborts its
  // communicator and refuses later ops.
  void break_pair(Pair& pair, std::exception_ptr error);
  void shut_down();

  Config config_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Op> incoming_;  // guarded by mu_
  bool stop_ = false;        // guarded by mu_
  std::map<int, std::unique_ptr<Pair>> pairs_;  // by peer; only the thread touches it
  std::thread thread_;
};

}  // namespace braid::collectives::nccl
