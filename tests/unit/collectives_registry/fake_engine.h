// An in-process engine for the registry tests: an Engine whose primitives are exact for a one-rank group
// (the data stays where it is), and groups made of it.
#pragma once

#include <atomic>
#include <dirent.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/check.h"
#include "collectives/queue/engine_process_group.h"
#include "collectives/registry/engine_factory.h"
#include "tensor/factory.h"

namespace braid::collectives::testing {

class FakeEngine final : public Engine {
 public:
  FakeEngine(int size, bool pattern_broadcast) : size_(size), pattern_broadcast_(pattern_broadcast) {}

  std::string_view name() const override { return "fake"; }
  int lanes() const override { return 1; }

  bool broadcast(Tensor& buffer, int, const OpContext&) override {
    if (pattern_broadcast_) buffer.copy_(braid::arange(buffer.numel(), DType::Float64).to(buffer.dtype()));
    return true;
  }
  bool allreduce(Tensor&, EngineOp, const OpContext&) override { return true; }
  bool reduce(Tensor&, EngineOp, int, const OpContext&) override { return true; }
  bool allgather(const Tensor& input, Tensor& output, const OpContext&) override { return one_rank().copy(input, output); }
  bool gather(const Tensor& input, Tensor& output, int, const OpContext&) override { return one_rank().copy(input, output); }
  bool scatter(const Tensor& input, Tensor& output, int, const OpContext&) override { return one_rank().copy(input, output); }
  bool reduce_scatter(const Tensor& input, Tensor& output, EngineOp, const OpContext&) override {
    return one_rank().copy(input, output);
  }
  bool alltoall(const Tensor& input, Tensor& output, const std::vector<int64_t>& send_counts,
                const std::vector<int64_t>& send_offsets, const std::vector<int64_t>&,
                const std::vector<int64_t>& recv_offsets, const OpContext&) override {
    one_rank();
    output.narrow(0, recv_offsets[0], send_counts[0]).copy_(input.narrow(0, send_offsets[0], send_counts[0]));
    return true;
  }
  bool barrier(const OpContext&) override { return true; }
  void post_send(const Tensor&, int, int, const Deadline&, std::shared_ptr<Work>) override {
    BRAID_THROW(InvalidArgument, "fake engine: no point-to-point");
  }
  void post_recv(Tensor&, int, int, const Deadline&, std::shared_ptr<Work>) override {
    BRAID_THROW(InvalidArgument, "fake engine: no point-to-point");
  }

 private:
  struct Copier {
    bool copy(const Tensor& in, Tensor& out) const {
      out.copy_(in.view(out.shape()));
      return true;
    }
  };
  Copier one_rank() const {
    BRAID_CHECK_ARG(size_ == 1, "fake engine: only one-rank groups move data");
    return {};
  }
  int size_;
  bool pattern_broadcast_;
};

// A group on the fake engine. With `pattern_broadcast`, broadcast writes 0, 1, 2, ... into the buffer
// instead, which lets a test see what a non-root rank unpacks.
inline std::shared_ptr<ProcessGroup> fake_group(int rank, int size, std::string name,
                                                std::shared_ptr<store::Store> store, bool pattern_broadcast = false) {
  EngineProcessGroup::Config config;
  config.store = std::move(store);
  config.timeout = Millis(5000);
  return std::make_shared<EngineProcessGroup>(GroupShape{rank, size, std::move(name)},
                                              std::make_unique<FakeEngine>(size, pattern_broadcast), nullptr,
                                              std::move(config));
}

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
  return fake_group(o.rank, o.size, o.group_name, o.store);
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
