#include "collectives/gloo/gloo_engine.h"

#include <complex>

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/gather.h>
#include <gloo/reduce.h>
#include <gloo/rendezvous/context.h>
#include <gloo/scatter.h>
#include <gloo/transport/device.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "base/check.h"
#include "base/logging.h"
#include "collectives/gloo/deadline_watchdog.h"
#include "collectives/gloo/gloo_devices.h"
#include "collectives/gloo/gloo_errors.h"
#include "collectives/gloo/gloo_p2p.h"
#include "collectives/gloo/gloo_reduce.h"
#include "collectives/gloo/gloo_store.h"
#include "collectives/gloo/gloo_timeout.h"
#include "collectives/gloo/one_step.h"
#include "collectives/gloo/reduce_scatter.h"
#include "collectives/gloo/registered_exchange.h"

namespace braid::collectives {

using gloo::gloo_timeout;

struct GlooEngine::LaneContext {
  LaneContext(std::shared_ptr<::gloo::Context> c, gloo::RegisteredExchange::Connect connect)
      : context(std::move(c)), exchange(std::move(connect)) {}
  std::shared_ptr<::gloo::Context> context;  // shared with other lanes (connect())
  gloo::Scratch scratch;  // reduce_scatter's receive buffers, reused by every op of the lane
  gloo::RegisteredExchange exchange;  // small reduce_scatters; its own context, connected on first use
};

namespace {

GroupShape checked_shape(const BackendOptions& options) {
  BRAID_CHECK_ARG(options.store != nullptr, "gloo process group '{}': a store is required (gloo bootstraps through it)",
                  options.group_name);
  BRAID_CHECK_ARG(options.threads >= 1 && options.threads <= 64, "process group '{}': lanes must be in [1, 64] (gloo threads), "
                  "got {}", options.group_name, options.threads);
  return GroupShape{options.rank, options.size, options.group_name};
}

// gloo's typed setters only use the type for its size; every dtype of that size moves the same way,
// and reductions get their dtype-aware function separately.
template <class F>
void with_element_type(size_t element_size, F&& f) {
  switch (element_size) {
    case 1: f.template operator()<uint8_t>(); return;
    case 2: f.template operator()<uint16_t>(); return;
    case 4: f.template operator()<uint32_t>(); return;
    case 8: f.template operator()<uint64_t>(); return;
    case 16: f.template operator()<std::complex<double>>(); return;  // complex128: splits keep whole elements
    default: BRAID_THROW(InternalError, "gloo: unexpected element size {}", element_size);
  }
}

uint8_t* bytes_of(const Tensor& t) { return static_cast<uint8_t*>(t.data_ptr()); }

// gloo's allreduce algorithms: ring sends 2(p-1)/p of the buffer per rank in 2(p-1) steps, pipelined
// in segments; bcube (recursive halving/doubling for powers of two) the same bytes in 2 log2(p) steps,
// without pipelining. Measured (README.md): bcube wins up to 1 MiB (by 1.4-2.8x at 4-64 KiB on 4 ranks:
// fewer steps), ring from 4 MiB on (by 10-40%: overlap). Every rank picks the same from the same size.
constexpr size_t kBcubeUpTo = 1 << 20;

::gloo::AllreduceOptions::Algorithm allreduce_algorithm(size_t bytes) {
  return bytes <= kBcubeUpTo ? ::gloo::AllreduceOptions::Algorithm::BCUBE : ::gloo::AllreduceOptions::Algorithm::RING;
}

// Allgathers whose per-rank block is at most this go in one step (one_step.h) instead of gloo's ring of
// 2(p-1) half-block steps. braid / raw gloo::allgather, paired medians of 7 rounds, 2-core VM:
//   4 ranks (2 per core), output 4 KiB 0.66x, 64 KiB 0.68x, 1 MiB 0.78-0.82x, 2 MiB 0.80x, but 4 MiB
//   (1 MiB blocks) 1.18-1.21x and 16 MiB 1.10x;
//   2 ranks, output 4 KiB 0.72x, 128 KiB 0.85-0.88x, 256 KiB 0.75x, 1 MiB 0.85-0.91x, but 4 MiB 1.31x.
// The same line as reduce_scatter's direct exchange (reduce_scatter.cc).
constexpr size_t kOneStepAllgatherMaxBlock = 512 * 1024;

// The pair timeout of the registered exchanges' contexts: their waits end at each op's deadline through
// the watchdog, so this is only a backstop. gloo waits for a connection five times its pair timeout, in a
// condition_variable::wait_for that must not overflow nanoseconds: its own "large" value, 100 hours.
constexpr Millis kExchangePairTimeout = std::chrono::hours(100);
// How long a group's destruction waits for its peers to finish their last registered exchange
// (part_registered_exchanges); when every rank destroys the group together it takes a store round trip.
constexpr Millis kPartingGrace{2000};

template <class F>
void run_gloo(const OpContext& ctx, F&& body) {
  const auto started = Clock::now();
  try {
    body();
  } catch (...) {
    gloo::rethrow_as_braid_error(ctx.what, ctx.deadline, started);
  }
}

}  // namespace

GlooEngine::GlooEngine(const BackendOptions& options)
    : shape_(checked_shape(options)), timeout_(options.timeout), lanes_(options.threads) {
  connect(options);
}

GlooEngine::~GlooEngine() {
  // The group's lanes are drained and joined by now.
  if (p2p_) p2p_->shutdown();
  part_registered_exchanges();
}

void GlooEngine::part_registered_exchanges() noexcept {
  const bool in_use = std::any_of(lane_contexts_.begin(), lane_contexts_.end(),
                                  [](const auto& lane) { return lane->exchange.in_use(); });
  if (!in_use || size() < 2) return;
  // Every lane's ops are done here. Through the store, not gloo: a gloo message would itself be the last
  // one read before its peer closes.
  try {
    store_->set(fmt::format("gloo/registered/parted/{}", rank()), store::Bytes{1});
    std::vector<std::string> peers;
    for (int r = 0; r < size(); ++r) {
      if (r != rank()) peers.push_back(fmt::format("gloo/registered/parted/{}", r));
    }
    store_->wait(peers, std::min(timeout_, kPartingGrace));
  } catch (const std::exception& e) {
    // A peer gone or late: it had its time to read its last data.
    logging::get("braid.collectives")
        ->debug("gloo group '{}' (rank {}): closing without every peer's word: {}", group_name(), rank(), e.what());
  }
}

std::shared_ptr<::gloo::Context> GlooEngine::connect_context(const std::string& prefix, size_t device_index,
                                                                   Millis pair_timeout, const Deadline& deadline) {
  const std::string what = fmt::format("gloo: connecting group '{}' (rank {}/{})", group_name(), rank(), size());
  auto context = std::make_shared<::gloo::rendezvous::Context>(rank(), size());
  context->setTimeout(pair_timeout);
  gloo::GlooStore store(store_, prefix, gloo_timeout(deadline));
  auto device = devices_[device_index % devices_.size()];
  const std::string where = fmt::format("{}: context '{}' on {}", what, prefix, device->str());
  try {
    context->connectFullMesh(store, device);
  } catch (const TimeoutError& e) {
    // From the store: a rank that never created its group (the message names the missing keys).
    BRAID_THROW(TimeoutError, "{}: {}", where, e.what());
  } catch (...) {
    gloo::rethrow_as_braid_error(where, deadline);
  }
  return context;
}

void GlooEngine::connect(const BackendOptions& options) {
  store_ = options.store;
  devices_ = gloo::tcp_devices(options.devices.empty()
                                   ? std::vector<std::string>{gloo::default_interface(options.store.get(), group_name(), rank(), size(), options.timeout)}
                                   : options.devices);
  const std::string what = fmt::format("gloo: connecting group '{}' (rank {}/{})", group_name(), rank(), size());
  const Deadline deadline = Deadline::after(options.timeout);
  auto connect_one = [&](const std::string& prefix, size_t index) {
    return connect_context(prefix, index, options.timeout, deadline);
  };
  // One context per device (at most one per lane), which the lanes share round-robin, as torch's worker
  // threads share its contexts: ops tell their messages apart by tag. With a context per lane, each lane's
  // connections sat idle while the other lane ran, and sequential ops cost more (README.md: "Lanes share
  // the contexts").
  std::vector<std::shared_ptr<::gloo::Context>> contexts;
  const size_t shared = std::min(devices_.size(), static_cast<size_t>(lanes()));
  for (size_t c = 0; c < shared; ++c) contexts.push_back(connect_one(fmt::format("gloo/context{}/", c), c));
  std::vector<std::function<void()>> aborts;
  for (int i = 0; i < lanes(); ++i) {
    auto connect_exchange = [this, i](const Deadline& op_deadline) {
      return connect_context(fmt::format("gloo/lane{}/registered/", i), static_cast<size_t>(i),
                             kExchangePairTimeout, op_deadline);
    };
    auto lane = std::make_unique<LaneContext>(contexts[static_cast<size_t>(i) % shared], std::move(connect_exchange));
    aborts.push_back([exchange = &lane->exchange] { exchange->abort(); });
    lane_contexts_.push_back(std::move(lane));
  }
  watchdog_ = std::make_unique<gloo::DeadlineWatchdog>(std::move(aborts));
  p2p_context_ = connect_one("gloo/p2p/", shared);
  p2p_ = std::make_unique<gloo::GlooP2P>(p2p_context_);

  // connectFullMesh returns once this rank's pairs are set up; a barrier on every context proves every
  // rank got there. Tag 0 is never an op's (sequence numbers start at 1).
  auto barrier_on = [&](const std::shared_ptr<::gloo::Context>& context) {
    try {
      ::gloo::BarrierOptions opts(context);
      opts.setTag(0);
      opts.setTimeout(gloo_timeout(deadline));
      ::gloo::barrier(opts);
    } catch (...) {
      gloo::rethrow_as_braid_error(what + ": barrier after connecting", deadline);
    }
  };
  for (const auto& context : contexts) barrier_on(context);
  barrier_on(p2p_context_);
}

GlooEngine::LaneContext& GlooEngine::lane(const OpContext& ctx) {
  BRAID_ASSERT(ctx.lane >= 0 && static_cast<size_t>(ctx.lane) < lane_contexts_.size(), "lane {} of {}", ctx.lane,
               lane_contexts_.size());
  return *lane_contexts_[static_cast<size_t>(ctx.lane)];
}

bool GlooEngine::reduces(DType dtype) const { return gloo::reduces_natively(dtype); }

bool GlooEngine::broadcast(Tensor& buffer, int root, const OpContext& ctx) {
  if (buffer.nbytes() == 0) return true;
  run_gloo(ctx, [&] {
    ::gloo::BroadcastOptions opts(lane(ctx).context);
    opts.setOutput<uint8_t>(bytes_of(buffer), buffer.nbytes());
    opts.setRoot(root);
    opts.setTag(static_cast<uint32_t>(ctx.seq));
    opts.setTimeout(gloo_timeout(ctx.deadline));
    ::gloo::broadcast(opts);
  });
  return true;
}

bool GlooEngine::allreduce(Tensor& buffer, EngineOp op, const OpContext& ctx) {
  if (buffer.numel() == 0) return true;
  const gloo::ReduceFn fn = gloo::reduce_function(buffer.dtype(), op);
  run_gloo(ctx, [&] {
    ::gloo::AllreduceOptions opts(lane(ctx).context);
    with_element_type(buffer.element_size(), [&]<class T>() {
      opts.setOutput<T>(static_cast<T*>(buffer.data_ptr()), static_cast<size_t>(buffer.numel()));
    });
    opts.setReduceFunction(fn);
    opts.setAlgorithm(allreduce_algorithm(buffer.nbytes()));
    opts.setTag(static_cast<uint32_t>(ctx.seq));
    opts.setTimeout(gloo_timeout(ctx.deadline));
    ::gloo::allreduce(opts);
  });
  return true;
}

bool GlooEngine::reduce(Tensor& buffer, EngineOp op, int root, const OpContext& ctx) {
  if (buffer.numel() == 0) return true;
  const gloo::ReduceFn fn = gloo::reduce_function(buffer.dtype(), op);
  run_gloo(ctx, [&] {
    // gloo reduces in place (non-roots' buffers serve as scratch; the group hands those a copy).
    ::gloo::ReduceOptions opts(lane(ctx).context);
    with_element_type(buffer.element_size(), [&]<class T>() {
      opts.setOutput<T>(static_cast<T*>(buffer.data_ptr()), static_cast<size_t>(buffer.numel()));
    });
    opts.setRoot(root);
    opts.setReduceFunction(fn);
    opts.setTag(static_cast<uint32_t>(ctx.seq));
    opts.setTimeout(gloo_timeout(ctx.deadline));
    ::gloo::reduce(opts);
  });
  return true;
}

bool GlooEngine::allgather(const Tensor& input, Tensor& output, const OpContext& ctx) {
  const size_t n = input.nbytes();
  if (n == 0) return true;
  if (n <= kOneStepAllgatherMaxBlock) {
    run_gloo(ctx, [&] {
      gloo::one_step_allgather(lane(ctx).context, input.data_ptr(), output.data_ptr(), n,
                               static_cast<uint32_t>(ctx.seq), ctx.deadline);
    });
    return true;
  }
  run_gloo(ctx, [&] {
    ::gloo::AllgatherOptions opts(lane(ctx).context);
    opts.setInput<uint8_t>(bytes_of(input), n);  // only read
    opts.setOutput<uint8_t>(bytes_of(output), n * static_cast<size_t>(size()));
    opts.setTag(static_cast<uint32_t>(ctx.seq));
    opts.setTimeout(gloo_timeout(ctx.deadline));
    ::gloo::allgather(opts);
  });
  return true;
}

bool GlooEngine::gather(const Tensor& input, Tensor& output, int root, const OpContext& ctx) {
  const size_t n = input.nbytes();
  if (n == 0) return true;
  run_gloo(ctx, [&] {
    ::gloo::GatherOptions opts(lane(ctx).context);
    opts.setInput<uint8_t>(bytes_of(input), n);
    if (rank() == root) opts.setOutput<uint8_t>(bytes_of(output), n * static_cast<size_t>(size()));
    opts.setRoot(root);
    opts.setTag(static_cast<uint32_t>(ctx.seq));
    opts.setTimeout(gloo_timeout(ctx.deadline));
    ::gloo::gather(opts);
  });
  return true;
}

bool GlooEngine::scatter(const Tensor& input, Tensor& output, int root, const OpContext& ctx) {
  const size_t n = output.nbytes();
  if (n == 0) return true;
  run_gloo(ctx, [&] {
    ::gloo::ScatterOptions opts(lane(ctx).context);
    if (rank() == root) {
      std::vector<uint8_t*> blocks;
      for (int r = 0; r < size(); ++r) blocks.push_back(bytes_of(input) + static_cast<size_t>(r) * n);
      opts.setInputs<uint8_t>(blocks, n);
    }
    opts.setOutput<uint8_t>(bytes_of(output), n);
    opts.setRoot(root);
    opts.setTag(static_cast<uint32_t>(ctx.seq));
    opts.setTimeout(gloo_timeout(ctx.deadline));
    ::gloo::scatter(opts);
  });
  return true;
}

bool GlooEngine::reduce_scatter(const Tensor& input, Tensor& output, EngineOp op, const OpContext& ctx) {
  if (output.numel() == 0) return true;
  const gloo::ReduceFn fn = gloo::reduce_function(output.dtype(), op);
  run_gloo(ctx, [&] {
    gloo::ReduceScatterArgs args;
    args.input = input.data_ptr();
    args.output = output.data_ptr();
    args.block_bytes = output.nbytes();
    args.element_size = output.element_size();
    args.reduce = fn;
    args.tag = static_cast<uint32_t>(ctx.seq);
    args.deadline = ctx.deadline;
    auto& l = lane(ctx);
    // Small blocks go in one message each (registered_exchange.h; numbers in README.md); the watchdog
    // ends the exchange's waits at the op's deadline. The choice rests on sizes alone, alike on every rank.
    const bool registered = size() > 1 && args.block_bytes <= gloo::RegisteredExchange::kMaxBlock &&
                            gloo::RegisteredExchange::available();
    if (registered) {
      gloo::DeadlineWatchdog::Armed armed(*watchdog_, static_cast<size_t>(ctx.lane), ctx.deadline);
      gloo::registered_reduce_scatter(l.exchange, rank(), size(), args);
    } else {
      gloo::reduce_scatter(l.context, args, l.scratch);
    }
  });
  return true;
}

bool GlooEngine::alltoall(const Tensor& input, Tensor& output, const std::vector<int64_t>& send_counts,
                                    const std::vector<int64_t>& send_offsets, const std::vector<int64_t>& recv_counts,
                                    const std::vector<int64_t>& recv_offsets, const OpContext& ctx) {
  const auto n = static_cast<size_t>(size());
  BRAID_ASSERT(send_counts.size() == n && send_offsets.size() == n && recv_counts.size() == n &&
                   recv_offsets.size() == n,
               "alltoall needs one count and offset per rank ({})", ctx.what);
  const gloo::AlltoallBlocks blocks{send_counts, send_offsets, recv_counts, recv_offsets,
                                    static_cast<size_t>(output.element_size())};
  const auto me = static_cast<size_t>(rank());
  if (send_counts[me] != recv_counts[me]) {
    BRAID_THROW(CommError, "{}: this rank sends itself {} elements but expects {} (gloo needs the two equal)",
                ctx.what, send_counts[me], recv_counts[me]);
  }
  // gloo's own alltoall(v) posts each send before the matching receive; one_step_alltoall posts every
  // receive first. braid / raw gloo::alltoall: collectives/gloo/README.md.
  run_gloo(ctx, [&] {
    gloo::one_step_alltoall(lane(ctx).context, input.data_ptr(), input.nbytes(), output.data_ptr(), output.nbytes(),
                            blocks, static_cast<uint32_t>(ctx.seq), ctx.deadline);
  });
  return true;
}

bool GlooEngine::barrier(const OpContext& ctx) {
  run_gloo(ctx, [&] {
    ::gloo::BarrierOptions opts(lane(ctx).context);
    opts.setTag(static_cast<uint32_t>(ctx.seq));
    opts.setTimeout(gloo_timeout(ctx.deadline));
    ::gloo::barrier(opts);
  });
  return true;
}

int GlooEngine::lanes() const { return lanes_; }

void GlooEngine::post_send(const Tensor& buffer, int dst, int tag, const Deadline& deadline,
                           std::shared_ptr<Work> work) {
  // The group checks peers; gloo would index its pairs with whatever it gets, so check again here.
  BRAID_CHECK_ARG(dst >= 0 && dst < size() && dst != rank(), "{}: invalid destination rank {}", work->what(), dst);
  p2p_->post_send(buffer, dst, tag, deadline, std::move(work));
}

void GlooEngine::post_recv(Tensor& buffer, int src, int tag, const Deadline& deadline, std::shared_ptr<Work> work) {
  BRAID_CHECK_ARG(src == -1 || (src >= 0 && src < size() && src != rank()), "{}: invalid source rank {}",
                  work->what(), src);
  p2p_->post_recv(buffer, src, tag, deadline, std::move(work));
}

std::unique_ptr<Engine> make_gloo_engine(const BackendOptions& options) {
  return std::make_unique<GlooEngine>(options);
}

}  // namespace braid::collectives
