// Asynchronous checkpoint writes (checkpoint.async, the default): a rank copies its state into memory and
// goes on training while a thread of its own writes the file.
//
//   submit(path, state)  copies every tensor of `state` into the writer's image of the file
//                        (nn::StateDictImage: the file's bytes in one block) and queues the write of `path`
//                        (temporary file written with O_DIRECT, fsync, rename); returns once copied. The
//                        image is kept from one checkpoint to the next while the state's layout stays the
//                        same, so that a snapshot touches no fresh page after the first: copying 1 GiB
//                        costs a memcpy, not 262144 first touches; and O_DIRECT writes it without the
//                        page cache's copy and write-back, which would take their CPU from the training.
//   submit(path, state, later)
//                        the same, but the entries `later` accepts are copied by the writer thread, before
//                        it writes: the caller promises to change none of them until wait_copied() has
//                        returned. A trainer defers its parameters and optimizer state, which only its
//                        optimizer step changes, and waits just before that step, so that their copy runs
//                        while the next step's forward and backward do (what mutates in a forward, such as
//                        normalization statistics, is copied at once).
//   wait_copied()        blocks until the deferred entries of the write in flight are copied (at once
//                        when there are none).
//   written(path)        whether that write is done (false while it runs), rethrowing its error; the
//                        driver asks every rank after each step, without blocking anyone.
//   wait(path)           blocks until that write is done, and rethrows its error.
//
// One write is in flight at a time: submit() first waits for the previous write (its buffers are about
// to be overwritten). The driver commits a checkpoint (meta.json, then `latest`) only when every rank's
// written() has said so, so a kill -9 during a write leaves `latest` on the previous complete checkpoint,
// which is kept until the new one is committed (checkpoint_dir.h).
//
// Threading: one writer thread per process, started by the first submit() and joined by the destructor
// (process_checkpoint_writer()'s at exit, after finishing what is queued). submit() and wait() may be
// called from any thread (RPC handlers).
#pragma once

#include <condition_variable>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "nn/serialize.h"
#include "nn/state_dict_image.h"

namespace braid::runtime {

class CheckpointWriter {
 public:
  CheckpointWriter() = default;
  ~CheckpointWriter();
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // InvalidArgument (nothing queued) for an entry save_state_dict would refuse; `path` is written as is.
  void submit(const std::string& path, const nn::StateDict& state,
              const std::function<bool(const std::string&)>& later = nullptr);
  void wait_copied();
  // True once `path` is written (and then forgets it), false while it is being written; rethrows the
  // write's error (braid::Error, InvalidArgument). InvalidArgument for a path that was never submitted
  // (or already reported).
  bool written(const std::string& path);
  void wait(const std::string& path);  // blocks until written(path) would say true
  // Bytes held in the snapshot image.
  size_t buffered_bytes() const;

 private:
  void run();

  mutable std::mutex mu_;
  std::condition_variable cv_;
  nn::StateDictImage image_;  // GUARDED_BY(mu_) while no write is in flight; the writer thread's during one
  struct Job {
    std::string path;
    std::vector<std::pair<size_t, Tensor>> deferred;  // (entry, source): the writer thread's copies
    bool copied = false;
  };
  std::optional<Job> job_;  // GUARDED_BY(mu_): the write in flight
  std::map<std::string, std::exception_ptr> done_;  // GUARDED_BY(mu_): finished writes (null: success)
  bool stop_ = false;                               // GUARDED_BY(mu_)
  std::thread thread_;
};

// The process's writer (ranks write their checkpoint files through it).
CheckpointWriter& process_checkpoint_writer();

// A rank's checkpoint file: through the process's writer when `async` (returns once copied, but for the
// entries `later` accepts: CheckpointWriter::submit), else written here (nn::save_state_dict).
void write_checkpoint_file(const std::string& path, const nn::StateDict& state, bool async,
                           const std::function<bool(const std::string&)>& later = nullptr);

}  // namespace braid::runtime
