#include "bench/checkpoint/checkpoint_bench.h"

#include <cblas.h>
#include <fmt/format.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <numeric>

#include "base/check.h"
#include "nn/serialize.h"
#include "runtime/run/checkpoint_writer.h"
#include "tensor/factory.h"
#include "tensor/ops/linalg.h"

namespace braid::bench {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// A training step's stand-in: `products` matrix products of 256 x 256 on this thread.
class Steps {
 public:
  Steps() : a_(rand({256, 256})), b_(rand({256, 256})) {}
  void step(int products) {
    for (int i = 0; i < products; ++i) sink_ = mm(a_, b_);
  }

 private:
  Tensor a_, b_, sink_;
};

// Deletes the benchmark's own temporary directory at the end.
class TempDir {
 public:
  explicit TempDir(const std::string& given) {
    if (!given.empty()) {
      std::filesystem::create_directories(given);
      path_ = given;
      return;
    }
    const char* tmp = std::getenv("TMPDIR");
    std::string templ = std::string(tmp != nullptr && *tmp != 0 ? tmp : "/tmp") + "/braid-bench-ckpt-XXXXXX";
    BRAID_CHECK_TYPED(Error, ::mkdtemp(templ.data()) != nullptr, "bench checkpoint: cannot make a temporary directory in {}",
                      templ);
    path_ = templ;
    owned_ = true;
  }
  ~TempDir() {
    std::error_code ec;
    if (owned_) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  bool owned_ = false;
};

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

CheckpointBenchResult run_checkpoint_bench(const CheckpointBenchOptions& o) {
  BRAID_CHECK_ARG(o.size_mb > 0 && o.tensors > 0 && o.rounds > 0 && o.step_ms > 0,
                  "bench checkpoint: --size-mb, --tensors, --rounds and --step-ms must be positive");
  const int64_t total = o.size_mb * (int64_t{1} << 20) / 4;
  const int64_t per = std::max<int64_t>(total / o.tensors, 1);
  nn::StateDict state;
  for (int i = 0; i < o.tensors; ++i) state.emplace_back(fmt::format("layer{}.weight", i), rand({per}));
  TempDir dir(o.dir);
  openblas_set_num_threads(o.threads);

  // Calibrate the step: products per step for ~step_ms.
  Steps steps;
  steps.step(20);
  auto t0 = Clock::now();
  steps.step(50);
  const double per_product_ms = seconds_since(t0) * 1000 / 50;
  const int products = std::max(1, static_cast<int>(o.step_ms / per_product_ms));
  auto baseline = [&] {
    std::vector<double> times;
    for (int i = 0; i < 15; ++i) {
      const auto t = Clock::now();
      steps.step(products);
      times.push_back(seconds_since(t));
    }
    return median(times);
  };
  CheckpointBenchResult r;
  r.step_ms = baseline() * 1000;

  runtime::CheckpointWriter writer;
  for (int round = 0; round < o.rounds; ++round) {
    const double step_s = baseline();
    // sync: the loop waits for the whole write.
    const std::string sync_path = fmt::format("{}/sync-{}.brsd", dir.path(), round);
    t0 = Clock::now();
    nn::save_state_dict(state, sync_path);
    r.sync_s.push_back(seconds_since(t0));
    std::filesystem::remove(sync_path);
    // Asynchronous, the copy first, then overlapped: the loop goes on while the writer writes, each step
    // ending with the optimizer step's wait for the deferred copy.
    for (const bool overlap : {false, true}) {
      const std::string path = fmt::format("{}/{}-{}.brsd", dir.path(), overlap ? "overlap" : "async", round);
      t0 = Clock::now();
      writer.submit(path, state, overlap ? [](const std::string&) { return true; }
                                         : std::function<bool(const std::string&)>());
      const double block = seconds_since(t0);
      double slow = 0;
      for (;;) {
        const auto t = Clock::now();
        steps.step(products);
        writer.wait_copied();
        slow += std::max(0.0, seconds_since(t) - step_s);
        if (writer.written(path)) break;
      }
      (overlap ? r.overlap_block_s : r.async_block_s).push_back(block);
      (overlap ? r.overlap_slow_s : r.async_slow_s).push_back(slow);
      if (!overlap) r.async_write_s.push_back(seconds_since(t0));
      std::filesystem::remove(path);
    }
  }
  return r;
}

std::string format_checkpoint_bench(const CheckpointBenchOptions& o, const CheckpointBenchResult& r) {
  std::string out = fmt::format(
      "bench checkpoint: {} MiB of float32 state in {} tensors; steps of {:.1f} ms on {} thread(s); {} rounds\n"
      "stall: the seconds the training loop lost to one checkpoint (ratio: overlapped stall / sync write)\n"
      "{:>6} {:>10} {:>12} {:>12} {:>12} {:>12} {:>8}\n",
      o.size_mb, o.tensors, r.step_ms, o.threads, o.rounds, "round", "sync s", "first copy s", "first stall",
      "overlap stall", "written s", "ratio");
  std::vector<double> steady;
  for (size_t i = 0; i < r.sync_s.size(); ++i) {
    const double first = r.async_block_s[i] + r.async_slow_s[i];
    const double overlapped = r.overlap_block_s[i] + r.overlap_slow_s[i];
    const double ratio = overlapped / r.sync_s[i];
    if (i > 0 || r.sync_s.size() == 1) steady.push_back(ratio);
    out += fmt::format("{:>6} {:>10.3f} {:>12.3f} {:>12.3f} {:>12.3f} {:>12.3f} {:>8.3f}{}\n", i + 1, r.sync_s[i],
                       r.async_block_s[i], first, overlapped, r.async_write_s[i], ratio,
                       i == 0 && r.sync_s.size() > 1 ? "  (first: the writer's buffers are allocated)" : "");
  }
  const double verdict = median(steady);
  out += fmt::format("RESULT checkpoint size_mb={} threads={} async_stall_over_sync={:.3f} ({} the 10% goal)\n",
                     o.size_mb, o.threads, verdict, verdict <= 0.10 ? "within" : "over");
  return out;
}

}  // namespace braid::bench
