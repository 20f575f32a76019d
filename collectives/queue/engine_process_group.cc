// EngineProcessGroup (engine_process_group.h): each call checked, queued and run on its engines.
#include "collectives/queue/engine_process_group.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/check.h"
#include "collectives/queue/call_checks.h"
#include "collectives/queue/complex_calls.h"
#include "collectives/queue/flat_buffers.h"
#include "collectives/queue/monitored_barrier.h"
#include "collectives/queue/op_bodies.h"
#include "tensor/sparse.h"

namespace braid::collectives {

namespace {

// A waiting rank publishes which op it is in after this long (or a quarter of the op's timeout, when
// shorter), so that a rank that times out can tell which ranks never entered the op.
constexpr Millis kPublishAfter{500};
// Ops up to this size finish within about a spin: the caller's wait and the lane's look for the next op
// spin only after them (a 1 MiB op takes ~200 us here; spinning through it only competes with the work).
constexpr int64_t kSpinBytes = 128 * 1024;

std::string describe_tensors(const TensorList& ts) {
  std::string out;
  for (const auto& t : ts) out += fmt::format(" {}{}", t.dtype(), shape_str(t.shape()));
  return out;
}

int64_t total_bytes(const TensorList& ts) {
  int64_t n = 0;
  for (const auto& t : ts) n += static_cast<int64_t>(t.nbytes());
  return n;
}

int64_t bytes_of(const Tensor& t) { return static_cast<int64_t>(t.nbytes()); }

// The flight recorder's view of an op (flight_recorder.h): elements in and out, and the dtype.
int64_t numel_of(const TensorList& ts) {
  int64_t n = 0;
  for (const auto& t : ts) n += t.numel();
  return n;
}
int64_t numel_of(const std::vector<TensorList>& lists) {
  int64_t n = 0;
  for (const auto& ts : lists) n += numel_of(ts);
  return n;
}
DType dtype_of(const TensorList& a, const TensorList& b) {
  if (!a.empty()) return a[0].dtype();
  if (!b.empty()) return b[0].dtype();
  return DType::Float32;
}

}  // namespace

EngineProcessGroup::EngineProcessGroup(GroupShape shape, std::unique_ptr<Engine> network, std::unique_ptr<Engine> local,
                                       Config config)
    : EngineProcessGroup(std::move(shape), std::move(network), std::move(local), nullptr, std::move(config)) {}

EngineProcessGroup::EngineProcessGroup(GroupShape shape, std::unique_ptr<Engine> network, std::unique_ptr<Engine> local,
                                       std::unique_ptr<Engine> hier, Config config)
    : ProcessGroup(shape.rank, shape.size, shape.name),
      shape_(std::move(shape)),
      config_(std::move(config)),
      network_(std::move(network)),
      local_(std::move(local)),
      hier_(std::move(hier)),
      router_(*network_, local_.get(), config_.policy, hier_.get()),
      recorder_(std::make_shared<FlightRecorder>(shape_, std::string(network_->name()), config_.trace_buffer_size ? *config_.trace_buffer_size : trace::buffer_size_from_env())),
      queue_(shape_.name, OpQueue::Config{network_->lanes(), config_.unclaimed_after, config_.look_gap_max}),
      health_(shape_, std::string(network_->name()), config_.store, queue_,
              HealthMonitor::Config{config_.stall_warn.value_or(HealthMonitor::stall_warn_from_env(kDefaultStallWarn)),
                                    recorder_, config_.desync_check}) {
  BRAID_CHECK_ARG(local_ == nullptr || local_->lanes() == network_->lanes(),
                  "process group '{}': the {} engine serves {} lanes, the {} engine {}", shape_.name, local_->name(),
                  local_->lanes(), network_->name(), network_->lanes());
  BRAID_CHECK_ARG(hier_ == nullptr || hier_->lanes() == network_->lanes(),
                  "process group '{}': the {} engine serves {} lanes, the {} engine {}", shape_.name, hier_->name(),
                  hier_->lanes(), network_->name(), network_->lanes());
  set_timeout(config_.timeout);
  if (recorder_->capacity() > 0) trace::register_recorder(recorder_);
}

EngineProcessGroup::~EngineProcessGroup() {
  stopping_.store(true, std::memory_order_release);
  // Every queued op completes or times out while the engines still exist; then the threads that read the
  // queue stop, and the members go in reverse order: the engines last.
  queue_.shutdown();
  health_.stop();
}

checks::Caller EngineProcessGroup::caller(std::string_view op) const {
  return checks::Caller{name(), rank(), size(), backend_name(), std::string(op)};
}

void EngineProcessGroup::throw_if_unusable(const char* op) const {
  if (stopping_.load(std::memory_order_acquire)) {
    BRAID_THROW(CommError, "{} on group '{}' (rank {}/{}, {}): the group is shut down", op, name(), rank(), size(),
                backend_name());
  }
  health_.throw_if_broken(op);
}

uint64_t EngineProcessGroup::engine_count(std::string_view engine, std::string_view path) const {
  for (const Engine* e : {network_.get(), local_.get(), hier_.get()}) {
    if (e == nullptr || e->name() != engine) continue;
    for (const auto& [name, count] : e->counters()) {
      if (name == path) return count;
    }
  }
  return 0;
}

Tensor EngineProcessGroup::empty_shared(const Shape& shape, DType dtype, Device device) {
  if (device.is_cpu() && local_ && router_.policy().local_enabled) {
    const size_t nbytes = static_cast<size_t>(shape_numel(shape)) * element_size(dtype);
    if (auto storage = local_->allocate_shared(nbytes, sequence_number() + 1)) {
      return Tensor::from_storage(std::move(storage), shape, contiguous_strides(shape), 0, dtype);
    }
  }
  return Tensor::empty(shape, TensorOptions(dtype, device));
}

void EngineProcessGroup::monitored_barrier(std::optional<Millis> timeout, bool wait_all_ranks) {
  if (!config_.store) checks::fail(caller("monitored_barrier"), "needs a store (create the group with one)");
  throw_if_unusable("monitored_barrier");
  const uint64_t n = monitored_barriers_.fetch_add(1) + 1;
  collectives::monitored_barrier(*config_.store, shape_, n, timeout_for(timeout), wait_all_ranks);
}

// ---- The op life cycle ----

std::shared_ptr<Work> EngineProcessGroup::issue(Call& call) {
  const auto one = [this](Call& c) { return std::visit([this](auto& x) { return issue_one(x); }, c); };
  if (complex_calls::any_complex(call)) return complex_calls::issue_with_real_views(caller(call_name(call)), call, one);
  return one(call);
}

std::shared_ptr<Work> EngineProcessGroup::enqueue(OpInfo info, Body body) {
  throw_if_unusable(info.op);
  const Millis timeout = timeout_for(info.timeout);
  OpContext ctx;
  ctx.seq = next_sequence_number();
  ctx.what = describe_op(info.op, ctx.seq);
  const auto now = Clock::now();
  ctx.deadline = Deadline(now + timeout);
  ctx.lane = static_cast<int>(ctx.seq % static_cast<uint64_t>(queue_.lanes()));
  auto work = std::make_shared<Work>(ctx.what, timeout);
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Forget completed works now and then, so the list stays as long as what is really in flight.
    if (in_flight_.size() >= 64) {
      std::erase_if(in_flight_, [](const std::weak_ptr<Work>& w) {
        auto s = w.lock();
        return !s || s->is_completed();
      });
    }
    in_flight_.push_back(work);
  }
  recorder_->scheduled(ctx.seq, info.op, info.io, now);
  const int lane = ctx.lane;
  const Deadline deadline = ctx.deadline;
  const bool small = info.bytes <= kSpinBytes;
  // The closure owns the Work, the inputs (inside body) and the context: dropping the caller's handle
  // neither cancels nor frees anything the op still uses.
  queue_.post(lane, deadline, small, work,
              [this, ctx = std::move(ctx), info = std::move(info), body = std::move(body), work]() mutable {
                run_op(ctx, info, std::move(body), *work);
              });
  return work;
}

void EngineProcessGroup::run_op(const OpContext& ctx, const OpInfo& info, Body&& queued_body, Work& work) {
  // The body holds the op's tensors: it goes before the Work completes, so a caller woken by the
  // completion finds them released (FSDP's full gradients die with its node; AccumulateGrad keeps a
  // shard gradient without copying it only when nobody else holds it).
  Body body = std::move(queued_body);
  if (health_.is_broken()) {
    const std::string broken = health_.broken();
    work.finish_with_error(std::make_exception_ptr(CommError(fmt::format(
        "{}: not run because the group broke before it started. First failure: {}", ctx.what, broken))));
    recorder_->ended(ctx.seq, false);
    return;
  }
  const auto started = Clock::now();
  const Millis publish_after = std::min(kPublishAfter, ctx.deadline.remaining(started) / 4);
  queue_.op_started(ctx.lane, ctx.seq, started, started + publish_after, info.bytes <= kSpinBytes);
  recorder_->started(ctx.seq, started);
  try {
    if (health_.detail()) health_.check_fingerprint(ctx, info.signature, *network_);
    TensorList result = body(ctx);
    body = nullptr;
    queue_.op_ended(ctx.lane);
    recorder_->ended(ctx.seq, true);
    work.finish(std::move(result));
  } catch (...) {
    body = nullptr;
    queue_.op_ended(ctx.lane);
    recorder_->ended(ctx.seq, false);
    auto error = health_.enrich_error(ctx, std::current_exception(), elapsed_ms(started));
    const bool first_failure = !health_.is_broken();
    bool timed_out = false;
    try {
      std::rethrow_exception(error);
    } catch (const TimeoutError& e) {
      timed_out = true;
      health_.record_failure(e.what());
    } catch (const std::exception& e) {
      health_.record_failure(e.what());
    }
    // The first failure breaks the group: what every rank was doing then is what a post-mortem needs.
    if (first_failure) (void)trace::dump_all(timed_out ? "timeout" : "failure");
    work.finish_with_error(error);
  }
}

std::vector<std::shared_ptr<Work>> EngineProcessGroup::incomplete_works() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::shared_ptr<Work>> out;
  for (const auto& w : in_flight_) {
    if (auto s = w.lock(); s && !s->is_completed()) out.push_back(std::move(s));
  }
  return out;
}

// ---- The calls ----

std::shared_ptr<Work> EngineProcessGroup::issue_one(BroadcastCall& c) {
  call_checks::check(caller(c.kName), c, *network_);
  const int root = static_cast<int>(c.options.root_rank);
  const auto index = static_cast<size_t>(c.options.root_tensor);
  const bool d = health_.detail();
  return enqueue({"broadcast", c.options.timeout, d ? fmt::format("broadcast root={}{}", root,
                                                                  describe_tensors({c.tensors[0]})) : "",
                  bytes_of(c.tensors[0]), {c.tensors[0].numel(), c.tensors[0].numel(), c.tensors[0].dtype()}},
                 [this, ts = c.tensors, root, index](const OpContext& ctx) {
                   return bodies::broadcast({router_, rank(), size()}, ts, root, index, ctx);
                 });
}

std::shared_ptr<Work> EngineProcessGroup::issue_one(AllreduceCall& c) {
  call_checks::check(caller(c.kName), c, *network_);
  const bool d = health_.detail();
  if (c.tensors[0].is_sparse()) {
    const auto& first = c.tensors[0].sparse();
    return enqueue({"allreduce", c.options.timeout,
                    d ? fmt::format("sparse allreduce {}{}", first.dtype(), shape_str(first.shape())) : "", 0,
                    {0, 0, first.dtype()}},
                   [this, ts = c.tensors](const OpContext& ctx) {
                     return bodies::sparse_allreduce({router_, rank(), size()}, ts, ctx);
                   });
  }
  const ReduceOp op = c.options.reduce_op;
  return enqueue({"allreduce", c.options.timeout, d ? fmt::format("allreduce {}{}", op, describe_tensors({c.tensors[0]})) : "",
                  bytes_of(c.tensors[0]), {c.tensors[0].numel(), c.tensors[0].numel(), c.tensors[0].dtype()}},
                 [this, ts = c.tensors, op](const OpContext& ctx) {
                   return bodies::allreduce({router_, rank(), size()}, ts, op, ctx);
                 });
}

std::shared_ptr<Work> EngineProcessGroup::issue_one(AllreduceCoalescedCall& c) {
  call_checks::check(caller(c.kName), c, *network_);
  const ReduceOp op = c.options.reduce_op;
  const bool d = health_.detail();
  return enqueue({"allreduce_coalesced", c.options.timeout,
                  d ? fmt::format("allreduce_coalesced {}{}", op, describe_tensors(c.tensors)) : "", total_bytes(c.tensors),
                  {numel_of(c.tensors), numel_of(c.tensors), dtype_of(c.tensors, {})}},
                 [this, ts = c.tensors, op](const OpContext& ctx) {
                   return bodies::allreduce_coalesced({router_, rank(), size()}, ts, op, ctx);
                 });
}

std::shared_ptr<Work> EngineProcessGroup::issue_one(ReduceCall& c) {
  call_checks::check(caller(c.kName), c, *network_);
  const ReduceOp op = c.options.reduce_op;
  const int root = static_cast<int>(c.options.root_rank);
  const bool d = health_.detail();
  return enqueue({"reduce", c.options.timeout, d ? fmt::format("reduce {} root={}{}", op, root, describe_tensors(c.tensors)) : "",
                  bytes_of(c.tensors[0]), {c.tensors[0].numel(), c.tensors[0].numel(), c.tensors[0].dtype()}},
                 [this, ts = c.tensors, op, root](const OpContext& ctx) {
                   return bodies::reduce({router_, rank(), size()}, ts, op, root, ctx);
                 });
}

std::shared_ptr<Work> EngineProcessGroup::issue_one(AllgatherCall& c) {
  call_checks::check(caller(c.kName), c, *network_);
  const bool d = health_.detail();
  return enqueue({"allgather", c.options.timeout, d ? fmt::format("allgather{}", describe_tensors(c.inputs)) : "",
                  total_bytes(c.inputs) * size(), {numel_of(c.inputs), numel_of(c.outputs), dtype_of(c.inputs, {})}},
                 [this, outs = c.outputs, ins = c.inputs](const OpContext& ctx) {
                   return bodies::allgather({router_, rank(), size()}, outs, ins, ctx);
                 });
}

std::shared_ptr<Work> EngineProcessGroup::issue_one(AllgatherIntoTensorCall& c) {
  call_checks::check(caller(c.kName), c, *network_);
  const bool d = health_.detail();
  return enqueue({"allgather_into_tensor", c.options.timeout,
                  d ? fmt::format("allgather_into_tensor{}", describe_tensors({c.input})) : "", bytes_of(c.output),
                  {c.input.numel(), c.output.numel(), c.input.dtype()}},
                 [this, output = c.output, input = c.input](const OpContext& ctx) {
                   return bodies::allgather_into_tensor({router_, rank(), size()}, output, input, ctx);
                 });
}

std::shared_ptr<Work> EngineProcessGroup::issue_one(AllgatherCoalescedCall& c) {
  call_checks::check(caller(c.kName), c, *network_);
  const bool d = health_.detail();
  return enqueue({"allgather_coalesced", c.options.timeout,
                  d ? fmt::format("allgather_coalesced{}", describe_tensors(c.inputs)) : "", total_bytes(c.inputs) * size(),
                  {numel_of(c.inputs), numel_of(c.outputs), dtype_of(c.inputs, {})}},
                 [this, outs = c.outputs, ins = c.inputs](const OpContext& ctx) {
                   return bodies::allgather_coalesced({router_, rank(), size()}, outs, ins, ctx);
                 });
}

std::shared_ptr<Work> EngineProcessGroup::issue_one(AllgatherIntoTensorCoalescedCall& c) {
  call_checks::check(caller(c.kName), c, *network_);
  const bool d = health_.detail();
  return enqueue({"allgather_into_tensor_coalesced", c.options.timeout,
                  d ? fmt::format("allgather_into_tensor_coalesced{}", describe_tensors(c.inputs)) : "",
                  total_bytes(c.inputs) * size(), {numel_of(c.inputs), numel_of(c.outputs), dtype_of(c.inputs, {})}},
                 [this, outs = c.outputs, ins = c.inputs](const OpContext& ctx) {
                   return bodies::allgather_into_tensor_coalesced({router_, rank(), size()}, outs, ins, ctx);
                 });
}

std::shared_ptr<Work> EngineProcessGroup::issue_one(GatherCall& c) {
  call_checks::check(caller(c.kName), c, *network_);
  const int root = static_cast<int>(c.options.root_rank);
  const bool d = health_.detail();
  return enqueue({"gather", c.options.timeout, d ? fmt::format("gather root={}{}", root, describe_tensors(c.inputs)) : "",
                  total_bytes(c.inputs), {numel_of(c.inputs), numel_of(c.outputs), dtype_of(c.inputs, {})}},
                 [this, outs = c.outputs, ins = c.inputs, root](const OpContext& ctx) {
                   return bodies::gather({router_, rank(), size()}, outs, ins, root, ctx);
                 });
}

std::shared_ptr<Work> EngineProcessGroup::issue_one(ScatterCall& c) {
  call_checks::check(caller(c.kName), c, *network_);
  const int root = static_cast<int>(c.options.root_rank);
  const bool d = health_.detail();
  return enqueue({"scatter", c.options.timeout, d ? fmt::format("scatter root={}{}", root, describe_tensors(c.outputs)) : "",
                  total_bytes(c.outputs), {numel_of(c.inputs), numel_of(c.outputs), dtype_of(c.outputs, {})}},
                 [this, outs = c.outputs, ins = c.inputs, root](const OpContext& ctx) {
                   return bodies::scatter({router_, rank(), size()}, outs, ins, root, ctx);
                 });
}

std::shared_ptr<Work> EngineProcessGroup::issue_one(ReduceScatterCall& c) {
  call_checks::check(caller(c.kName), c, *network_);
  const ReduceOp op = c.options.reduce_op;
  const bool d = health_.detail();
  return enqueue({"reduce_scatter", c.options.timeout,
                  d ? fmt::format("reduce_scatter {}{}", op, describe_tensors(c.outputs)) : "", total_bytes(c.inputs[0]),
                  {numel_of(c.inputs), numel_of(c.outputs), dtype_of(c.outputs, {})}},
                 [this, outs = c.outputs, ins = c.inputs[0], op](const OpContext& ctx) {
                   return bodies::reduce_scatter({router_, rank(), size()}, outs, ins, op, ctx);
                 });
}

std::shared_ptr<Work> EngineProcessGroup::issue_one(ReduceScatterTensorCall& c) {
  call_checks::check(caller(c.kName), c, *network_);
  const ReduceOp op = c.options.reduce_op;
  const bool d = health_.detail();
  return enqueue({"reduce_scatter_tensor", c.options.timeout,
                  d ? fmt::format("reduce_scatter_tensor {}{}", op, describe_tensors({c.output})) : "", bytes_of(c.input),
                  {c.input.numel(), c.output.numel(), c.input.dtype()}},
                 [this, output = c.output, input = c.input, op, scratch = c.options.input_is_scratch](const OpContext& ctx) {
                   return bodies::reduce_scatter_tensor({router_, rank(), size()}, output, input, op, scratch, ctx);
                 });
}

std::shared_ptr<Work> EngineProcessGroup::issue_one(ReduceScatterTensorCoalescedCall& c) {
  call_checks::check(caller(c.kName), c, *network_);
  const ReduceOp op = c.options.reduce_op;
  const bool d = health_.detail();
  return enqueue({"reduce_scatter_tensor_coalesced", c.options.timeout,
                  d ? fmt::format("reduce_scatter_tensor_coalesced {}{}", op, describe_tensors(c.outputs)) : "",
                  total_bytes(c.inputs), {numel_of(c.inputs), numel_of(c.outputs), dtype_of(c.inputs, {})}},
                 [this, outs = c.outputs, ins = c.inputs, op](const OpContext& ctx) {
                   return bodies::reduce_scatter_tensor_coalesced({router_, rank(), size()}, outs, ins, op, ctx);
                 });
}

std::shared_ptr<Work> EngineProcessGroup::issue_one(AlltoallCall& c) {
  call_checks::check(caller(c.kName), c, *network_);
  const bool d = health_.detail();
  return enqueue({"alltoall", c.options.timeout, d ? fmt::format("alltoall {}", c.inputs[0].dtype()) : "",
                  total_bytes(c.inputs), {numel_of(c.inputs), numel_of(c.outputs), dtype_of(c.inputs, {})}},
                 [this, outs = c.outputs, ins = c.inputs](const OpContext& ctx) {
                   return bodies::alltoall({router_, rank(), size()}, outs, ins, ctx);
                 });
}

std::shared_ptr<Work> EngineProcessGroup::issue_one(AlltoallSingleCall& c) {
  auto counts = call_checks::check(caller(c.kName), c, *network_);
  bodies::AlltoallLayout layout{std::move(counts.send_counts), std::move(counts.send_offsets),
                                std::move(counts.recv_counts), std::move(counts.recv_offsets)};
  const bool d = health_.detail();
  return enqueue({"alltoall_single", c.options.timeout, d ? fmt::format("alltoall_single {}", c.input.dtype()) : "",
                  bytes_of(c.input), {c.input.numel(), c.output.numel(), c.input.dtype()}},
                 [this, output = c.output, input = c.input, layout = std::move(layout)](const OpContext& ctx) {
                   return bodies::alltoall_single({router_, rank(), size()}, output, input, layout, ctx);
                 });
}

std::shared_ptr<Work> EngineProcessGroup::issue_one(BarrierCall& c) {
  // Every op issued before the barrier, on any lane, must complete before it does.
  auto earlier = incomplete_works();
  return enqueue({"barrier", c.options.timeout, health_.detail() ? "barrier" : "", 0, {}},
                 [this, earlier = std::move(earlier)](const OpContext& ctx) {
                   return bodies::barrier({router_, rank(), size()}, earlier, ctx);
                 });
}

std::shared_ptr<Work> EngineProcessGroup::issue_one(SendCall& c) {
  return post_p2p("send", c.tensors, c.dst_rank, c.tag, true);
}

std::shared_ptr<Work> EngineProcessGroup::issue_one(RecvCall& c) {
  return post_p2p(c.any_source() ? "recv_anysource" : "recv", c.tensors, c.src_rank, c.tag, false);
}

// ---- point to point ----

std::shared_ptr<Work> EngineProcessGroup::post_p2p(const char* op, TensorList& tensors, int peer, int tag,
                                                    bool is_send) {
  const bool any_source = std::string_view(op) == "recv_anysource";
  if (any_source) network_->check_any_source(caller(op));
  network_->check_tag(caller(op), tag);
  call_checks::check_p2p(caller(op), tensors, peer, tag, is_send, any_source, *network_);
  throw_if_unusable(op);
  const std::string what = peer == -1 ? fmt::format("{} (tag {}, any source) on group '{}' (rank {}/{}, {})", op, tag,
                                                    name(), rank(), size(), backend_name())
                                      : fmt::format("{} (peer {}, tag {}) on group '{}' (rank {}/{}, {})", op, peer, tag,
                                                    name(), rank(), size(), backend_name());
  auto work = std::make_shared<Work>(what, timeout());
  const Tensor user = tensors[0];
  const DType dtype = flat::move_dtype(user.dtype());
  const bool direct = user.is_contiguous() && user.dtype() == dtype;
  if (direct) {
    if (is_send) {
      network_->post_send(user, peer, tag, Deadline::after(timeout()), work);
    } else {
      Tensor buf = user;
      network_->post_recv(buf, peer, tag, Deadline::after(timeout()), work);
    }
    return work;
  }
  // Staged: the engine works on a packed copy; a recv copies back before the user's Work completes.
  Tensor buf = flat::as_buffer(user, dtype);
  auto inner = std::make_shared<Work>(what, timeout());
  inner->get_future().add_callback([work, inner, user, buf, is_send](const Future<TensorList>& f) {
    if (f.has_error()) {
      work->finish_with_error(f.error());
      return;
    }
    work->set_source_rank(inner->source_rank());
    if (!is_send) flat::copy_into(user, buf);
    work->finish({user});
  });
  if (is_send) {
    network_->post_send(buf, peer, tag, Deadline::after(timeout()), inner);
  } else {
    network_->post_recv(buf, peer, tag, Deadline::after(timeout()), inner);
  }
  return work;
}

}  // namespace braid::collectives
