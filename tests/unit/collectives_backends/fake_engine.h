// An in-process engine for the registry tests: a QueuedProcessGroup whose primitives are exact for a
// one-rank group (the data stays where it is). With `pattern_broadcast`, run_broadcast writes 0, 1, 2, ...
// into the buffer instead, which lets a test see what a non-root rank unpacks.
#pragma once

#include <atomic>
#include <dirent.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/check.h"
#include "collectives/backends/backends.h"
#include "collectives/queued_process_group.h"
#include "tensor/factory.h"

namespace braid::collectives::testing {

class FakeEngine final : public QueuedProcessGroup {
 public:
  FakeEngine(int rank, int size, std::string name, std::shared_ptr<store::Store> store, bool pattern_broadcast = false)
      : QueuedProcessGroup(rank, size, std::move(name),
                           Config{1, std::move(store), Millis(5000), std::nullopt, std::nullopt, 0}),
        pattern_broadcast_(pattern_broadcast) {}
  ~FakeEngine() override { shutdown(); }

  std::string backend_name() const override { return "fake"; }

 protected:
  void run_broadcast(Tensor& buffer, int, const OpContext&) override {
    if (pattern_broadcast_) buffer.copy_(braid::arange(buffer.numel(), DType::Float64).to(buffer.dtype()));
  }
  void run_allreduce(Tensor&, EngineOp, const OpContext&) override {}
  void run_reduce(Tensor&, EngineOp, int, const OpContext&) override {}
  void run_allgather(const Tensor& input, Tensor& output, const OpContext&) override { one_rank().copy(input, output); }
  void run_gather(const Tensor& input, Tensor& output, int, const OpContext&) override { one_rank().copy(input, output); }
  void run_scatter(const Tensor& input, Tensor& output, int, const OpContext&) override { one_rank().copy(input, output); }
  void run_reduce_scatter(const Tensor& input, Tensor& output, EngineOp, const OpContext&) override {
    one_rank().copy(input, output);
  }
  void run_alltoall(const Tensor& input, Tensor& output, const std::vector<int64_t>& send_counts,
                    const std::vector<int64_t>& send_offsets, const std::vector<int64_t>&,
                    const std::vector<int64_t>& recv_offsets, const OpContext&) override {
    one_rank();
    output.narrow(0, recv_offsets[0], send_counts[0]).copy_(input.narrow(0, send_offsets[0], send_counts[0]));
  }
  void run_barrier(const OpContext&) override {}
  void post_send(const Tensor&, int, int, std::shared_ptr<Work>) override {
    BRAID_THROW(InvalidArgument, "fake engine: no point-to-point");
  }
  void post_recv(Tensor&, int, int, std::shared_ptr<Work>) override {
    BRAID_THROW(InvalidArgument, "fake engine: no point-to-point");
  }

 private:
  struct Copier {
    void copy(const Tensor& in, Tensor& out) const { out.copy_(in.view(out.shape())); }
  };
  Copier one_rank() const {
    BRAID_CHECK_ARG(size() == 1, "fake engine: only one-rank groups move data");
    return {};
  }
  bool pattern_broadcast_;
};

// Every BackendOptions the "fake" backend was asked for, in order.
inline std::mutex& created_mu() {
  static std::mutex mu;
  return mu;
}
inline std::vector<BackendOptions>& created() {
  static std::vector<BackendOptions> v;
  return v;
}

inline std::shared_ptr<ProcessGroup> make_fake(const BackendOptions& o) {
  {
    std::lock_guard<std::mutex> lock(created_mu());
    created().push_back(o);
  }
  return std::make_shared<FakeEngine>(o.rank, o.size, o.group_name, o.store);
}

// Threads of this process (entries of /proc/self/task).
inline int thread_count() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] != '.') ++n;
    }
    closedir(d);
  }
  return n;
}

}  // namespace braid::collectives::testing
