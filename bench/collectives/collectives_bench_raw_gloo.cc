// Raw Gloo reference of `braid bench collectives` (see collectives_bench_raw.h): gloo's own algorithms on
// one gloo context that this file connects itself, so nothing of braid's gloo engine (lanes,
// queue, staging, braid's reduce functions or ring) is on the path. Only the store adapter and the
// process-wide TCP device are braid's, as in the engine: they serve connecting, not the ops. Built when
// Gloo is (BRAID_HAVE_GLOO).
#include "base/config.h"
#include "bench/collectives/collectives_bench_raw.h"

#if BRAID_HAVE_GLOO
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/reduce_scatter.h>
#include <gloo/rendezvous/context.h>
#include <gloo/types.h>

#include <cstdint>
#include <memory>

#include "collectives/gloo/gloo_devices.h"
#include "collectives/gloo/gloo_store.h"
#endif

#include "base/check.h"

namespace braid::bench {

#if BRAID_HAVE_GLOO
namespace {

// Calls f.template operator()<T>() with the element type gloo's templates want for `dtype`.
template <class F>
void with_gloo_type(DType dtype, F&& f) {
  switch (dtype) {
    case DType::Float32: f.template operator()<float>(); return;
    case DType::Float64: f.template operator()<double>(); return;
    case DType::Int32: f.template operator()<int32_t>(); return;
    case DType::Int64: f.template operator()<int64_t>(); return;
    case DType::Float16: f.template operator()<::gloo::float16>(); return;
    default: break;
  }
  BRAID_THROW(InternalError, "bench collectives: raw gloo has no element type for {}", dtype_name(dtype));
}

// Moving data only needs the element size.
template <class F>
void with_move_type(size_t element_size, F&& f) {
  switch (element_size) {
    case 1: f.template operator()<uint8_t>(); return;
    case 2: f.template operator()<uint16_t>(); return;
    case 4: f.template operator()<uint32_t>(); return;
    case 8: f.template operator()<uint64_t>(); return;
    default: break;
  }
  BRAID_THROW(InternalError, "bench collectives: raw gloo: unexpected element size {}", element_size);
}

// gloo::sum<T> is overloaded; the new-style API wants the (out, in1, in2, n) one.
template <class T>
::gloo::AllreduceOptions::Func gloo_sum() {
  return static_cast<void (*)(void*, const void*, const void*, size_t)>(&::gloo::sum<T>);
}

class RawGloo final : public RawCollective {
 public:
  RawGloo(const std::shared_ptr<store::Store>& store, int rank, int size, std::chrono::milliseconds timeout,
          const std::string& interface)
      : timeout_(timeout) {
    // No interface given: the one braid's gloo groups take (loopback on one host, the shared network
    // across hosts), found through the same store.
    const std::string iface =
        interface.empty() ? collectives::gloo::default_interface(store.get(), "bench-raw-gloo", rank, size, timeout)
                          : interface;
    auto device = collectives::gloo::tcp_devices({iface}).front();
    auto context = std::make_shared<::gloo::rendezvous::Context>(rank, size);
    context->setTimeout(timeout);
    collectives::gloo::GlooStore gloo_store(store, "bench/raw-gloo/", timeout);
    context->connectFullMesh(gloo_store, device);
    context_ = context;
  }

  std::string call_name(BenchOp op) const override {
    static constexpr const char* kNames[] = {"gloo::allreduce", "gloo::allgather", "gloo::broadcast",
                                             "gloo::ReduceScatterHalvingDoubling", "gloo::alltoall"};
    return kNames[static_cast<int>(op)];
  }

  bool supports(BenchOp op, DType dtype) const override {
    const bool reduces = op == BenchOp::Allreduce || op == BenchOp::ReduceScatter;
    return !reduces || dtype == DType::Float32 || dtype == DType::Float64 || dtype == DType::Int32 ||
           dtype == DType::Int64 || dtype == DType::Float16;
  }

  void prepare(BenchOp op, const BenchBuffers& b) override {
    reduce_scatter_.reset();
    if (op != BenchOp::ReduceScatter) return;
    // The old-style algorithm object registers its buffers with the pairs once; run() reuses them. It
    // reduces in place: this rank's block ends up at the start of the input.
    const int block = static_cast<int>(b.output.numel());
    const std::vector<int> blocks(static_cast<size_t>(context_->size), block);
    with_gloo_type(b.input.dtype(), [&]<class T>() {
      reduce_scatter_ = std::make_unique<::gloo::ReduceScatterHalvingDoubling<T>>(
          context_, std::vector<T*>{static_cast<T*>(b.input.data_ptr())}, static_cast<int>(b.input.numel()), blocks);
    });
  }

  void run(BenchOp op, const BenchBuffers& b) override {
    switch (op) {
      case BenchOp::Allreduce: {
        ::gloo::AllreduceOptions opts(context_);
        with_gloo_type(b.input.dtype(), [&]<class T>() {
          opts.setOutput<T>(static_cast<T*>(b.input.data_ptr()), static_cast<size_t>(b.input.numel()));
          opts.setReduceFunction(gloo_sum<T>());
        });
        opts.setTag(next_tag());
        opts.setTimeout(timeout_);
        ::gloo::allreduce(opts);
        return;
      }
      case BenchOp::Broadcast: {
        ::gloo::BroadcastOptions opts(context_);
        opts.setOutput<uint8_t>(static_cast<uint8_t*>(b.input.data_ptr()), b.input.nbytes());
        opts.setRoot(0);
        opts.setTag(next_tag());
        opts.setTimeout(timeout_);
        ::gloo::broadcast(opts);
        return;
      }
      case BenchOp::Allgather: {
        ::gloo::AllgatherOptions opts(context_);
        opts.setInput<uint8_t>(static_cast<uint8_t*>(b.input.data_ptr()), b.input.nbytes());
        opts.setOutput<uint8_t>(static_cast<uint8_t*>(b.output.data_ptr()), b.output.nbytes());
        opts.setTag(next_tag());
        opts.setTimeout(timeout_);
        ::gloo::allgather(opts);
        return;
      }
      case BenchOp::ReduceScatter:
        BRAID_ASSERT(reduce_scatter_ != nullptr, "raw gloo: prepare() was not called for reduce_scatter");
        reduce_scatter_->run();
        return;
      case BenchOp::Alltoall: {
        ::gloo::AlltoallOptions opts(context_);
        with_move_type(b.input.element_size(), [&]<class T>() {
          opts.setInput<T>(static_cast<T*>(b.input.data_ptr()), static_cast<size_t>(b.input.numel()));
          opts.setOutput<T>(static_cast<T*>(b.output.data_ptr()), static_cast<size_t>(b.output.numel()));
        });
        opts.setTag(next_tag());
        opts.setTimeout(timeout_);
        ::gloo::alltoall(opts);
        return;
      }
    }
  }

  void barrier() override {
    ::gloo::BarrierOptions opts(context_);
    opts.setTag(next_tag());
    opts.setTimeout(timeout_);
    ::gloo::barrier(opts);
  }

 private:
  uint32_t next_tag() { return tag_++; }

  std::chrono::milliseconds timeout_;
  std::shared_ptr<::gloo::Context> context_;
  std::unique_ptr<::gloo::Algorithm> reduce_scatter_;
  uint32_t tag_ = 1;  // every rank makes the same calls in the same order, so the counters agree
};

}  // namespace

std::unique_ptr<RawCollective> make_raw_gloo(const std::shared_ptr<store::Store>& store, int rank, int size,
                                             std::chrono::milliseconds timeout, const std::string& device) {
  return std::make_unique<RawGloo>(store, rank, size, timeout, device);
}

#else

std::unique_ptr<RawCollective> make_raw_gloo(const std::shared_ptr<store::Store>&, int, int, std::chrono::milliseconds,
                                             const std::string&) {
  BRAID_THROW(InvalidArgument, "bench collectives: this braid was built without Gloo (CMake option BRAID_WITH_GLOO)");
}

#endif

}  // namespace braid::bench
