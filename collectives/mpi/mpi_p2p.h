// MpiP2p: send/recv of one MPI process group, and the thread that completes them.
//
// post_send/post_recv call MPI_Isend/MPI_Irecv at once on the calling thread, on a communicator used only
// for point-to-point traffic (so user tags can never match a collective's messages), and hand the request
// to the progress thread. That thread tests every outstanding request (MPI_Testsome, with Backoff between
// rounds, sleeping on a condition variable when nothing is outstanding), completes each Work (a recv's
// source rank comes from its MPI_Status) and fails a Work with TimeoutError when its deadline passes,
// cancelling the request where MPI allows it.
//
// The thread also adopts the requests of collectives that timed out: MPI cannot cancel those, so their
// buffers stay alive until the operation completes (a late peer) or MPI is finalised.
//
// Works are completed on the progress thread, so a Future callback runs there; a slow callback delays
// other completions of the group but never blocks a collective.
//
// Thread-safety: post_* and adopt_abandoned may be called from any thread; stop() from one.
#pragma once

#include <mpi.h>

#include <any>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/deadline.h"
#include "collectives/core/work.h"

namespace braid::collectives::mpi {

class MpiRuntime;

class MpiP2p {
 public:
  // `comm` stays owned by the caller and must outlive stop(). `group` names the group in messages.
  MpiP2p(MPI_Comm comm, std::shared_ptr<MpiRuntime> runtime, std::string group);
  ~MpiP2p();
  MpiP2p(const MpiP2p&) = delete;
  MpiP2p& operator=(const MpiP2p&) = delete;

  // `buffer` is contiguous; it is kept alive until MPI is done with it. src == -1: any source.
  void post_send(const Tensor& buffer, int dst, int tag, Deadline deadline, std::shared_ptr<Work> work);
  void post_recv(const Tensor& buffer, int src, int tag, Deadline deadline, std::shared_ptr<Work> work);
  // Takes over a request that can no longer be waited for, with what must outlive it.
  void adopt_abandoned(MPI_Request request, std::any keep);

  // Joins the progress thread; Works still pending fail with CommError; requests still active are
  // cancelled or, failing that, handed to the runtime with their buffers. Idempotent.
  void stop();

 private:
  enum class Kind : uint8_t { Send, Recv, Abandoned };
  struct Pending {
    Kind kind = Kind::Send;
    MPI_Request request = MPI_REQUEST_NULL;
    Tensor buffer;
    std::any keep;
    std::shared_ptr<Work> work;  // null once completed (a timed-out op waits here for its cancel)
    int peer = -1;
    int tag = 0;
    Deadline deadline = Deadline::never();
    Clock::time_point posted;
  };

  void enqueue(Pending pending);
  void run();
  // Tests the active requests once; returns whether any completed.
  bool poll();
  bool any_work() const;
  // How long to stay busy before sleeping, from the largest message a Work waits for.
  std::chrono::microseconds busy_window() const;
  void complete(Pending& p, const MPI_Status& status, int error);
  void expire(Pending& p);
  std::string describe(const Pending& p) const;
  void release_remaining();

  MPI_Comm comm_;
  std::shared_ptr<MpiRuntime> runtime_;
  std::string group_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Pending> incoming_;  // GUARDED_BY(mu_): posted, not yet seen by the thread
  bool stop_ = false;              // GUARDED_BY(mu_)
  bool stopped_ = false;           // GUARDED_BY(mu_)

  // Owned by the progress thread (and by stop() after the join).
  std::vector<Pending> active_;
  std::vector<MPI_Request> requests_;  // parallel to active_, for MPI_Testsome

  std::thread thread_;
};

}  // namespace braid::collectives::mpi
