// NcclP2P: send/recv of one NCCL group. NCCL has no tags and no any-source receive; it matches sends and
// receives between two ranks in the order they are issued. So:
//   * every direction between two ranks (a -> b) is a channel: its own two-rank communicator (the
//     sender publishes the NCCL id under "nccl/p2p/<a>-to-<b>" in the group's store) and its own stream,
//     created the first time a message goes that way. A receive that waits for its sender blocks only
//     its channel, never traffic with other ranks, the group's collectives, or the opposite direction:
//     two ranks that each post a send and then a receive to the other cannot deadlock, whatever the sizes
//     (on one communicator both sends could wait for receives queued behind them);
//   * messages of a channel match in posting order whatever their tags (torch's NCCL backend also ignores
//     them); any-source receives are refused by NcclEngine::check_any_source before they get here.
//
// post() only queues. One completion thread per group does everything that may wait: setting up channel
// communicators (without blocking: the id is polled in the store, NCCL init is non-blocking, so a ring
// where every rank first receives from its left neighbour cannot deadlock), issuing ncclSend/ncclRecv
// after the default stream's pending work (where the buffer was produced), and polling each op's CUDA
// event. An op that passes its deadline fails with TimeoutError; its channel's communicator is then
// aborted (by the watchdog) and the channel is broken: its other ops fail with CommError, and so do later
// ones.
//
// Thread-safety: post() may be called from any thread.
#pragma once

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "collectives/nccl/nccl_watchdog.h"
#include "collectives/core/work.h"
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
  // Fails every op that has not completed with CommError ("the group was destroyed"), aborts the channel
  // communicators that still had ops in flight, destroys the others and joins the thread.
  ~NcclP2P();
  NcclP2P(const NcclP2P&) = delete;
  NcclP2P& operator=(const NcclP2P&) = delete;

  // Queues a send (or recv) of `buffer` (contiguous, on the group's device) to (from) `peer`; `work`
  // completes when the data has left (arrived), or fails after `timeout`. Never blocks.
  void post(bool is_send, const Tensor& buffer, int peer, Millis timeout, std::shared_ptr<Work> work);

 private:
  struct Op;
  struct Channel;

  void loop();
  // Moves one channel forward as far as it can without waiting; returns whether anything changed.
  bool advance(Channel& ch);
  void set_up(Channel& ch);
  void issue(Channel& ch);
  bool complete_finished(Channel& ch);
  void check_deadlines(Channel& ch);
  // Fails the channel's ops (the oldest with `error`, the rest with CommError naming it), aborts its
  // communicator and refuses later ops.
  void break_channel(Channel& ch, std::exception_ptr error);
  void shut_down();

  Config config_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Op> incoming_;  // guarded by mu_
  bool stop_ = false;        // guarded by mu_
  // By (peer, this rank sends); only the thread touches it.
  std::map<std::pair<int, bool>, std::unique_ptr<Channel>> channels_;
  std::thread thread_;
};

}  // namespace braid::collectives::nccl
