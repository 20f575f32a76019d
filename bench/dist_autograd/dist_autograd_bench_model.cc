// `braid bench dist-autograd`'s remote model: the rpc class kDistAutogradBenchModel around nn::Linear,
// with a traced forward whose hooks time the owner's part of the backward pass.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <memory>

#include "autograd/variable.h"
#include "base/check.h"
#include "bench/dist_autograd/dist_autograd_bench.h"
#include "bench/dist_autograd/dist_autograd_bench_model.h"
#include "dist_autograd/context.h"
#include "nn/linear.h"
#include "rpc/registry.h"

namespace braid::bench {
namespace detail {

int64_t bench_clock_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace detail

namespace {

using detail::OwnerStamp;

// Written by hooks on the backward pass's threads, read by "trace" after the caller's backward returned
// (and so after every hook of that pass ran): atomics are enough.
struct OwnerTrace {
  std::array<std::atomic<int64_t>, detail::kNumOwnerStamps> stamps{};
  void stamp(OwnerStamp which) { stamps[which].store(detail::bench_clock_ns(), std::memory_order_relaxed); }
  // d W and d b may reach their accumulators in either order: keep the earlier.
  void stamp_params_ready() {
    const int64_t now = detail::bench_clock_ns();
    int64_t seen = stamps[detail::kParamsReady].load(std::memory_order_relaxed);
    while ((seen == 0 || now < seen) &&
           !stamps[detail::kParamsReady].compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
    }
  }
  // ... and be accumulated in either order: keep the later.
  void stamp_params() {
    const int64_t now = detail::bench_clock_ns();
    int64_t seen = stamps[detail::kParamsDone].load(std::memory_order_relaxed);
    while (seen < now && !stamps[detail::kParamsDone].compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
    }
  }
};

struct BenchLinear {
  std::shared_ptr<nn::Linear> linear;
  // Hooks hold it too: a context (and the hooks on its tensors) may outlive the model by a release.
  std::shared_ptr<OwnerTrace> trace = std::make_shared<OwnerTrace>();
  std::once_flag params_hooked;
};

rpc::Value forward_traced(BenchLinear& m, const rpc::Args& a) {
  const std::shared_ptr<OwnerTrace> trace = m.trace;
  for (auto& s : trace->stamps) s.store(0, std::memory_order_relaxed);
  trace->stamp(detail::kForwardEntry);
  // Registered on the first traced call, so that the timed iterations before it run without them.
  std::call_once(m.params_hooked, [&] {
    for (const Tensor& p : {m.linear->weight(), m.linear->bias()}) {
      autograd::register_hook(p, [trace](const Tensor&) {
        trace->stamp_params_ready();
        return Tensor();
      });
      autograd::register_post_accumulate_grad_hook(p, [trace](const Tensor&, const Tensor&) { trace->stamp_params(); });
    }
  });
  const Tensor& x = a.at(0).as_tensor();
  Tensor out = m.linear->forward(x);
  autograd::register_hook(out, [trace](const Tensor&) {
    trace->stamp(detail::kOutGrad);
    return Tensor();
  });
  if (autograd::requires_grad(x)) {  // received from a caller inside a context: its node sends d x back
    autograd::register_hook(x, [trace](const Tensor&) {
      trace->stamp(detail::kInputGrad);
      return Tensor();
    });
  }
  trace->stamp(detail::kForwardExit);
  return out;
}

rpc::Value trace_of(const BenchLinear& m) {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  rpc::ValueList out{rpc::Value(std::string(host))};
  for (const auto& s : m.trace->stamps) out.emplace_back(s.load(std::memory_order_relaxed));
  return rpc::list(std::move(out));
}

}  // namespace

void register_dist_autograd_bench_classes(rpc::Registry& registry) {
  if (registry.find_class(kDistAutogradBenchModel)) return;
  registry.add_class<BenchLinear>(kDistAutogradBenchModel)
      .constructor([](const rpc::Args& a) {
        BRAID_CHECK_ARG(a.size() == 3, "{}: expected (in_features, out_features, seed), got {} arguments",
                        kDistAutogradBenchModel, a.size());
        Generator gen(static_cast<uint64_t>(a.at(2).as_int()));
        auto m = std::make_shared<BenchLinear>();
        m->linear = std::make_shared<nn::Linear>(a.at(0).as_int(), a.at(1).as_int(), /*bias=*/true, &gen);
        return m;
      })
      .method("forward",
              [](BenchLinear& m, const rpc::Args& a) -> rpc::Value { return m.linear->forward(a.at(0).as_tensor()); })
      .method("forward_traced", forward_traced)
      .method("trace", [](BenchLinear& m, const rpc::Args&) { return trace_of(m); })
      .method("gradients", [](BenchLinear& m, const rpc::Args& a) -> rpc::Value {
        const dist_autograd::GradientMap grads = dist_autograd::get_gradients(a.at(0).as_int());
        return rpc::list({rpc::Value(grads.at(m.linear->weight())), rpc::Value(grads.at(m.linear->bias()))});
      });
}

}  // namespace braid::bench
