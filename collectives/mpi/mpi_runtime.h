// MpiRuntime: the one MPI initialisation of a process, shared by every MPI process group and by the
// mpirun bootstrap store.
//
// MPI can be initialised once per process and never again after MPI_Finalize, so the runtime is a
// process-wide object made by std::call_once on the first acquire():
//   * if the application already called MPI_Init/MPI_Init_thread, braid uses that MPI as it is, provided
//     it runs at MPI_THREAD_MULTIPLE (braid's lane, progress and user threads all call MPI), and never
//     finalises it: the application owns it and may still use MPI after braid is done;
//   * otherwise braid calls MPI_Init_thread(MPI_THREAD_MULTIPLE) itself and finalises at process exit, when
//     the last owner lets go. Owners are a static holder (released during static destruction) and every live
//     group, so a group that outlives the holder (a global, say) still frees its communicators before
//     MPI_Finalize runs. Finalising earlier, when the last group dies, would make a later group impossible:
//     MPI cannot be initialised twice.
// Anything less than MPI_THREAD_MULTIPLE is an error naming the level the library gave.
//
// Before initialising, braid sets Open MPI's libnbc iallreduce algorithm (see collectives/mpi/README.md for
// the measurements) unless the user's environment already names one.
//
// Thread-safety: acquire() and every method may be called from any thread.
#pragma once

#include <mpi.h>

#include <any>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace braid::collectives::mpi {

class MpiRuntime {
 public:
  // Initialises MPI on the first call (see above) and returns the process's runtime. Throws CommError when
  // MPI cannot be initialised, gives less than MPI_THREAD_MULTIPLE, or was already finalised.
  static std::shared_ptr<MpiRuntime> acquire();

  ~MpiRuntime();
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;

  int world_rank() const { return world_rank_; }
  int world_size() const { return world_size_; }
  // Whether braid called MPI_Init_thread (and so will call MPI_Finalize).
  bool owns_mpi() const { return owns_mpi_; }
  // True once MPI_Finalize ran (by braid or by the application): no MPI call may follow.
  static bool finalized();

  // SUM over 8-bit integers that wraps around. Open MPI 4.1.4's op/avx component saturates 8-bit sums
  // (200 + 200 gives 255 for uint8) once a message is long enough to vectorise, in every collective that
  // reduces, blocking or not; a user-defined op never goes through op/avx.
  MPI_Op wrapping_byte_sum() const { return wrapping_byte_sum_; }

  // Whether Open MPI yields the core inside its progress loop when a call finds nothing to do
  // (mpi_yield_when_idle: on by default when mpirun oversubscribes the node, or set by the user). Then
  // every MPI_Test that finds its request incomplete has already called sched_yield, and a waiter that
  // yields once more between tests only hands its core away twice per look (mpi_wait.h). False until
  // the runtime exists.
  static bool progress_yields_when_idle();

  // Keeps `keep` (buffers of a request that can never be cancelled: a timed-out nonblocking collective, a
  // send whose cancel failed) alive until MPI is finalised, so that MPI never writes into freed memory.
  void keep_until_finalize(std::any keep);

 private:
  MpiRuntime() = default;
  static std::shared_ptr<MpiRuntime> create();

  bool owns_mpi_ = false;
  int world_rank_ = 0;
  int world_size_ = 1;
  MPI_Op wrapping_byte_sum_ = MPI_OP_NULL;
  std::mutex mu_;
  std::vector<std::any> graveyard_;  // GUARDED_BY(mu_)
};

// "MPI_THREAD_SERIALIZED" etc.
const char* thread_level_name(int level);

// Throws CommError "<call> failed in <what>: <MPI error string>" when rc is not MPI_SUCCESS. Communicators
// made by braid use MPI_ERRORS_RETURN, so failures surface here instead of aborting the job.
void check_mpi(int rc, const char* call, const std::string& what);
std::string mpi_error_string(int rc);

}  // namespace braid::collectives::mpi
