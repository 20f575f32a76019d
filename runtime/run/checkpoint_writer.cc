#include "runtime/run/checkpoint_writer.h"

#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include "base/check.h"
#include "base/logging.h"

namespace braid::runtime {

namespace {
constexpr int kWriterNice = 10;
}  // namespace

CheckpointWriter::~CheckpointWriter() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void CheckpointWriter::submit(const std::string& path, const nn::StateDict& state,
                              const std::function<bool(const std::string&)>& later) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !job_.has_value(); });  // the image is free again
  BRAID_CHECK_ARG(!done_.count(path), "checkpoint '{}': written before and not yet waited for", path);
  image_.layout(state, path);  // validates every entry first: nothing is queued for a bad one
  Job job;
  job.path = path;
  for (size_t i = 0; i < state.size(); ++i) {
    if (later && later(state[i].first)) {
      // A handle of its own on the storage: FSDP points its parameters' handles at the gathered full
      // tensors during the forward this copy overlaps (Tensor::set_data); their shard storage stays.
      job.deferred.emplace_back(i, state[i].second.alias());
    } else {
      image_.fill(i, state[i].second);
    }
  }
  job.copied = job.deferred.empty();
  job_.emplace(std::move(job));
  if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  lock.unlock();
  cv_.notify_all();
}

void CheckpointWriter::wait_copied() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !job_ || job_->copied; });
}

void CheckpointWriter::run() {
  // Below the training threads: when the cores are busy, the write takes the time they leave.
  ::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), kWriterNice);
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || job_.has_value(); });
    if (!job_) return;  // stopping with nothing queued
    const std::string path = job_->path;
    std::vector<std::pair<size_t, Tensor>> deferred = std::move(job_->deferred);
    lock.unlock();
    std::exception_ptr error;
    try {
      // The deferred copies first: a trainer waits for them before its optimizer step.
      for (const auto& [i, source] : deferred) image_.fill(i, source);
    } catch (...) {
      error = std::current_exception();
    }
    deferred.clear();  // the sources may go (a trainer destroyed after its last checkpoint)
    lock.lock();
    job_->copied = true;
    cv_.notify_all();
    lock.unlock();
    if (!error) {
      try {
        // The image is this thread's while job_ is set: nobody else touches it.
        image_.seal();
        image_.write(path);
      } catch (...) {
        error = std::current_exception();
      }
    }
    lock.lock();
    done_[path] = error;
    job_.reset();
    cv_.notify_all();
  }
}

bool CheckpointWriter::written(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = done_.find(path);
  if (it == done_.end()) {
    BRAID_CHECK_ARG(job_ && job_->path == path, "checkpoint '{}': no write of it is pending on this rank", path);
    return false;
  }
  const std::exception_ptr error = it->second;
  done_.erase(it);
  if (error) std::rethrow_exception(error);
  return true;
}

void CheckpointWriter::wait(const std::string& path) {
  {
    std::unique_lock<std::mutex> lock(mu_);
    const bool known = done_.count(path) > 0 || (job_ && job_->path == path);
    BRAID_CHECK_ARG(known, "checkpoint '{}': no write of it is pending on this rank", path);
    cv_.wait(lock, [&] { return done_.count(path) > 0; });
  }
  written(path);
}

size_t CheckpointWriter::buffered_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<size_t>(image_.capacity());
}

CheckpointWriter& process_checkpoint_writer() {
  static CheckpointWriter writer;
  return writer;
}

void write_checkpoint_file(const std::string& path, const nn::StateDict& state, bool async,
                           const std::function<bool(const std::string&)>& later) {
  if (async) {
    process_checkpoint_writer().submit(path, state, later);
  } else {
    nn::save_state_dict(state, path);
  }
}

}  // namespace braid::runtime
