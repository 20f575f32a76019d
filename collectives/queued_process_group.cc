// The machinery of QueuedProcessGroup: lanes, the op life cycle, error enrichment, the progress monitor
// behind the missing-ranks report, BRAID_DEBUG=DETAIL fingerprints, p2p posting and monitored_barrier.
// The collectives themselves (checks and bodies) are in queued_collectives.cc.
#include "collectives/queued_process_group.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <sched.h>

#include <algorithm>

#include "base/check.h"
#include "base/env.h"
#include "base/logging.h"
#include "collectives/shared_staging.h"
#include "collectives/staging.h"

namespace braid::collectives {

namespace {

// A waiting rank publishes which op it is in after this long (or a quarter of the op's timeout, when
// shorter), so that a rank that times out can tell which ranks never entered the op.
constexpr Millis kPublishAfter{500};
constexpr Millis kMonitorTick{50};
// How long an idle lane looks for the next op before it sleeps (see lane_loop).
constexpr std::chrono::microseconds kLaneSpin{30};
// Ops up to this size finish within about the spin: the caller's wait and the lane's look for the next op
// spin only after them (a 1 MiB op takes ~200 us here; spinning through it only competes with the work).
constexpr int64_t kSpinBytes = 128 * 1024;
constexpr std::chrono::microseconds kWaitSpin{30};
// Waiter mode (see Lane) ends after this long without ops.
constexpr Millis kWaiterIdle{20};

// Set while a waiter runs ops in Lane::help (QueuedProcessGroup::on_waiting_thread).
thread_local bool t_running_for_waiter = false;

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

int64_t shared_staging_max_from(const QueuedProcessGroup::Config& config) {
  if (config.shared_staging_max_bytes) return *config.shared_staging_max_bytes;
  const auto v = env::get("BRAID_SHM_STAGING_MAX_BYTES");
  return v ? env::parse_size(*v, "BRAID_SHM_STAGING_MAX_BYTES") : config.shared_staging_default_max;
}

bool detail_mode_from_env() {
  const auto v = env::get("BRAID_DEBUG");
  return v && (*v == "DETAIL" || *v == "detail");
}

}  // namespace

// One lane: a queue of ops run in issue order by the lane's thread or, when the lane is idle, by a thread
// that waits for one of them (Work::wait -> help()). `busy` says that some thread is running one of the
// lane's ops; whoever sets it runs the queue's front, so the order never changes.
//
// Waiter mode: once a waiter has run an op itself, the lane expects the caller to wait for the next ones
// too (post, wait, post, wait: the synchronous pattern) and enqueue() no longer wakes the lane's thread:
// the caller runs the op in its wait() with no hand-off in either direction. The lane's thread then
// sleeps until the group's Watcher finds an op left unclaimed for Config::unclaimed_after (a caller that
// did not wait) and wakes it to start the op, which ends the mode; kWaiterIdle without ops ends it too.
// A caller that posts an op while its previous one on the lane is still queued unclaimed is not waiting
// either: enqueue() ends the mode and wakes the lane's thread at once.
//
// One watcher per group, not a timed wait per lane: gloo's two lanes woke twice as often, and each
// wake-up costs a context switch on a core that a rank's op is using. The watcher looks every
// unclaimed_after while it finds ops queued, and doubles the gap after each look that finds none, up to
// Config::look_gap_max: a post-and-wait loop (nothing ever queued at a look) then pays a wake-up every
// few milliseconds rather than every one. Each wake-up may preempt a waiter running an op: a 16 MiB
// allgather loop on mpi, 2 ranks, went from ~0.24 to ~0.09 context switches per op in rank 0 and from
// 1.030x to 1.022x raw (alltoall 1.039x to 1.032x; docs/PERFORMANCE.md, "Large copies in pieces").
struct QueuedProcessGroup::Watcher {
  Watcher(std::chrono::microseconds unclaimed, std::chrono::microseconds gap_max)
      : unclaimed_after(unclaimed), look_gap_max(gap_max) {}

  const std::chrono::microseconds unclaimed_after;
  const std::chrono::microseconds look_gap_max;
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;     // GUARDED_BY(mu)
  bool entered = false;  // GUARDED_BY(mu): a lane entered waiter mode since the last look
  std::thread thread;

  // A lane entered waiter mode: look every unclaimed_after from now on. Called with the lane's lock held
  // (lock order: Lane::mu, then Watcher::mu; the watcher never holds both).
  void wake() {
    {
      std::lock_guard<std::mutex> lock(mu);
      entered = true;
    }
    cv.notify_one();
  }
};

struct QueuedProcessGroup::Lane final : Work::Helper {
  struct Task {
    Clock::time_point queued_at;
    Clock::time_point deadline;  // the op's own deadline: a waiter runs it only if it ends within the wait
    std::function<void()> run;
  };
  explicit Lane(std::shared_ptr<Watcher> w) : watcher(std::move(w)) {}

  // Shared: a Work may call help() after the group is gone (it then finds the queue empty).
  const std::shared_ptr<Watcher> watcher;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Task> queue;
  bool stop = false;
  bool busy = false;
  // Written under mu; the watcher reads it without mu to decide whether to keep looking.
  std::atomic<bool> waiter_mode{false};
  Clock::time_point last_queued{};
  std::thread thread;
  std::atomic<size_t> queued{0};           // queue.size(), readable without the lock while spinning
  std::atomic<bool> last_was_small{true};  // whether the last op was small enough to spin after
  // The op running now (0: none) and when the monitor should publish it.
  std::atomic<uint64_t> running_seq{0};
  std::atomic<Clock::rep> publish_at{0};

  // The watcher's look at `now`: wakes the lane's thread for an op left unclaimed for unclaimed_after, and
  // ends waiter mode after kWaiterIdle without ops. Returns whether an op is queued in waiter mode (the
  // watcher then looks again soon).
  bool look(Clock::time_point now) {
    std::lock_guard<std::mutex> lock(mu);
    if (!waiter_mode.load(std::memory_order_relaxed)) return false;
    if (busy) return !queue.empty();
    if (!queue.empty()) {
      if (now >= queue.front().queued_at + watcher->unclaimed_after) cv.notify_one();  // lane_loop starts it
      return true;
    }
    if (now - last_queued > kWaiterIdle) waiter_mode.store(false);
    return false;
  }

  void help(const Work& work, Clock::time_point limit) override {
    std::unique_lock<std::mutex> lock(mu);
    bool ran = false;
    while (!work.is_completed() && !busy && !queue.empty() && queue.front().deadline <= limit) {
      {
        Task task = std::move(queue.front());
        queue.pop_front();
        queued.fetch_sub(1, std::memory_order_relaxed);
        busy = true;
        lock.unlock();
        const bool outer = t_running_for_waiter;  // a waiter may wait (barrier) inside an op it runs
        t_running_for_waiter = true;
        task.run();  // run_op: never throws
        t_running_for_waiter = outer;
      }  // the op's closure (inputs, Work) is released outside the lock
      lock.lock();
      busy = false;
      ran = true;
    }
    if (ran && !stop && !waiter_mode.load(std::memory_order_relaxed)) {
      waiter_mode.store(true);
      watcher->wake();
    }
    // At shutdown the lane's thread waits for the lane to be free. Notified under the lock: once it is
    // released, the group (and this lane) may be destroyed.
    if (ran && stop) cv.notify_all();
  }
};

QueuedProcessGroup::QueuedProcessGroup(int rank, int size, std::string name, Config config)
    : ProcessGroup(rank, size, std::move(name)),
      config_(std::move(config)),
      detail_(detail_mode_from_env()),
      shared_pool_bytes_(static_cast<size_t>(
          env::parse_size(env::get("BRAID_SHM_POOL_BYTES").value_or("4G"), "BRAID_SHM_POOL_BYTES"))),
      shared_min_bytes_(config_.shared_min_bytes.value_or(env::parse_size(
          env::get("BRAID_SHM_ALLREDUCE_MIN_BYTES").value_or("64K"), "BRAID_SHM_ALLREDUCE_MIN_BYTES"))),
      shared_staging_max_(shared_staging_max_from(config_)),
      watcher_(std::make_shared<Watcher>(config_.unclaimed_after, config_.look_gap_max)) {
  BRAID_CHECK_ARG(config_.lanes >= 1 && config_.lanes <= 64, "process group '{}': lanes must be in [1, 64], got {}",
                  this->name(), config_.lanes);
  BRAID_CHECK_ARG(shared_staging_max_ >= 0, "process group '{}': the shared-memory staging's maximum size must be "
                  ">= 0, got {}", this->name(), shared_staging_max_);
  BRAID_CHECK_ARG(config_.unclaimed_after.count() > 0 && config_.look_gap_max >= config_.unclaimed_after,
                  "process group '{}': waiter mode needs 0 < unclaimed_after <= look_gap_max, got {} and {} us",
                  this->name(), config_.unclaimed_after.count(), config_.look_gap_max.count());
  BRAID_CHECK_ARG(shared_min_bytes_ >= 0, "process group '{}': the shared-memory allreduce's minimum size must be "
                  ">= 0, got {}", this->name(), shared_min_bytes_);
  set_timeout(config_.timeout);
  for (int i = 0; i < config_.lanes; ++i) lanes_.push_back(std::make_shared<Lane>(watcher_));
  for (auto& lane : lanes_) {
    Lane* l = lane.get();
    l->thread = std::thread([this, l] { lane_loop(*l); });
  }
  watcher_->thread = std::thread([this] { watch_loop(); });
  if (config_.store) monitor_ = std::thread([this] { monitor_loop(); });
}

QueuedProcessGroup::~QueuedProcessGroup() { shutdown(); }

bool QueuedProcessGroup::on_waiting_thread() { return t_running_for_waiter; }

void QueuedProcessGroup::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && lanes_.empty()) return;
    stopping_ = true;
  }
  for (auto& lane : lanes_) {
    {
      std::lock_guard<std::mutex> lock(lane->mu);
      lane->stop = true;
    }
    lane->cv.notify_all();
  }
  for (auto& lane : lanes_) {
    if (lane->thread.joinable()) lane->thread.join();
  }
  // After the lanes: at stop, lanes run everything at once and no lane enters waiter mode any more.
  {
    std::lock_guard<std::mutex> lock(watcher_->mu);
    watcher_->stop = true;
  }
  watcher_->cv.notify_all();
  if (watcher_->thread.joinable()) watcher_->thread.join();
  monitor_cv_.notify_all();
  if (monitor_.joinable()) monitor_.join();
  std::lock_guard<std::mutex> lock(mu_);
  lanes_.clear();
}

std::string QueuedProcessGroup::progress_key(int rank) const {
  return fmt::format("braid/pg/{}/progress/{}", name(), rank);
}

checks::Caller QueuedProcessGroup::caller(const char* op) const {
  return checks::Caller{name(), rank(), size(), backend_name(), op};
}

void QueuedProcessGroup::throw_if_unusable(const char* op) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) {
    BRAID_THROW(CommError, "{} on group '{}' (rank {}/{}, {}): the group is shut down", op, name(), rank(), size(),
                backend_name());
  }
  if (!broken_.empty()) {
    BRAID_THROW(CommError, "{} on group '{}' (rank {}/{}, {}): the group is broken since an earlier op failed; "
                "create a new group. First failure: {}", op, name(), rank(), size(), backend_name(), broken_);
  }
}

// ---- The op life cycle ----

std::shared_ptr<Work> QueuedProcessGroup::enqueue(OpInfo info, Body body) {
  throw_if_unusable(info.op);
  const Millis timeout = timeout_for(info.timeout);
  OpContext ctx;
  ctx.seq = next_sequence_number();
  ctx.what = describe_op(info.op, ctx.seq);
  const auto queued_at = Clock::now();
  ctx.deadline = Deadline(queued_at + timeout);
  ctx.lane = static_cast<int>(ctx.seq % lanes_.size());
  auto work = std::make_shared<Work>(ctx.what, timeout);
  if (info.bytes <= kSpinBytes) work->set_wait_spin(kWaitSpin);
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
  const auto& lane_ptr = lanes_[static_cast<size_t>(ctx.lane)];
  Lane& lane = *lane_ptr;
  work->set_helper(lane_ptr);
  const Clock::time_point deadline = ctx.deadline.at();
  bool notify = false;
  {
    std::lock_guard<std::mutex> lock(lane.mu);
    // The caller posts again while its last op here is still queued unclaimed: it is not waiting.
    if (lane.waiter_mode.load(std::memory_order_relaxed) && !lane.busy && !lane.queue.empty()) {
      lane.waiter_mode.store(false);
    }
    // The closure owns the Work, the inputs (inside body) and the context: dropping the caller's handle
    // neither cancels nor frees anything the op still uses.
    lane.last_queued = queued_at;
    lane.queue.push_back({lane.last_queued, deadline,
                          [this, ctx = std::move(ctx), info = std::move(info), body = std::move(body),
                           work]() mutable { run_op(ctx, info, std::move(body), *work); }});
    lane.queued.fetch_add(1, std::memory_order_release);
    notify = !lane.waiter_mode;
  }
  if (notify) lane.cv.notify_one();
  return work;
}

namespace {

// The watcher only looks for unclaimed ops. Under the default policy each of its wake-ups preempts the
// waiter that is running an op on the same core (a sleeper's wake-up wins): measured on 2 ranks on 2
// cores with the look in each lane's thread, about one preemption per 1 ms, and 1 MiB allreduces 3-11%
// slower than the raw call. SCHED_BATCH threads never preempt on wake-up; they run at the next
// scheduling point (at once on an idle core).
void set_batch_policy() {
  sched_param param{};
  param.sched_priority = 0;
  (void)::sched_setscheduler(0, SCHED_BATCH, &param);  // best effort: a hint
}

}  // namespace

void QueuedProcessGroup::lane_loop(Lane& lane) {
  std::unique_lock<std::mutex> lock(lane.mu);
  for (;;) {
    if (!lane.busy && !lane.queue.empty()) {
      // In waiter mode the front op is left to a waiter for unclaimed_after (then the watcher wakes this
      // thread); at shutdown everything runs now.
      if (lane.waiter_mode.load(std::memory_order_relaxed) && !lane.stop &&
          Clock::now() < lane.queue.front().queued_at + watcher_->unclaimed_after) {
        lane.cv.wait(lock);
        continue;
      }
      lane.waiter_mode.store(false);
      {
        Lane::Task task = std::move(lane.queue.front());
        lane.queue.pop_front();
        lane.queued.fetch_sub(1, std::memory_order_relaxed);
        lane.busy = true;
        lock.unlock();
        task.run();
      }  // the op's closure is released outside the lock
      lock.lock();
      lane.busy = false;
      if (lane.queue.empty() && lane.last_was_small.load()) {
        // A caller that waits for one op and issues the next (when it did not run the op itself) posts
        // within a few microseconds: looking for it briefly before sleeping saves a thread wake-up.
        lock.unlock();
        const auto spin_until = Clock::now() + kLaneSpin;
        while (lane.queued.load(std::memory_order_acquire) == 0 && Clock::now() < spin_until) ::sched_yield();
        lock.lock();
      }
      continue;
    }
    if (lane.stop && !lane.busy && lane.queue.empty()) return;  // stop requested and drained
    // Nothing to run now. enqueue() wakes this thread outside waiter mode, the watcher within it, a
    // waiter when it leaves the lane at shutdown.
    lane.cv.wait(lock);
  }
}

void QueuedProcessGroup::watch_loop() {
  set_batch_policy();
  std::unique_lock<std::mutex> lock(watcher_->mu);
  auto gap = watcher_->unclaimed_after;
  while (!watcher_->stop) {
    const bool looking = std::any_of(lanes_.begin(), lanes_.end(), [](const std::shared_ptr<Lane>& l) {
      return l->waiter_mode.load();
    });
    if (!looking) {
      watcher_->cv.wait(lock);  // Watcher::wake() when a lane enters waiter mode
      continue;
    }
    if (watcher_->entered) {
      watcher_->entered = false;
      gap = watcher_->unclaimed_after;
    }
    watcher_->cv.wait_for(lock, gap);
    if (watcher_->stop) break;
    lock.unlock();
    const auto now = Clock::now();
    bool queued = false;
    for (const auto& lane : lanes_) queued = lane->look(now) || queued;
    lock.lock();
    gap = queued ? watcher_->unclaimed_after : std::min(2 * gap, watcher_->look_gap_max);
  }
}

void QueuedProcessGroup::run_op(const OpContext& ctx, const OpInfo& info, Body&& queued_body, Work& work) {
  // The body holds the op's tensors: it goes before the Work completes, so a caller woken by the
  // completion finds them released (FSDP's full gradients die with its node; AccumulateGrad keeps a
  // shard gradient without copying it only when nobody else holds it).
  Body body = std::move(queued_body);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!broken_.empty()) {
      work.finish_with_error(std::make_exception_ptr(CommError(fmt::format(
          "{}: not run because the group broke before it started. First failure: {}", ctx.what, broken_))));
      return;
    }
  }
  Lane& lane = *lanes_[static_cast<size_t>(ctx.lane)];
  const auto started = Clock::now();
  const Millis publish_after = std::min(kPublishAfter, ctx.deadline.remaining(started) / 4);
  lane.publish_at.store((started + publish_after).time_since_epoch().count());
  lane.running_seq.store(ctx.seq);
  lane.last_was_small.store(info.bytes <= kSpinBytes);
  try {
    if (detail_) check_fingerprint(ctx, info);
    TensorList result = body(ctx);
    body = nullptr;
    lane.running_seq.store(0);
    work.finish(std::move(result));
  } catch (...) {
    body = nullptr;
    lane.running_seq.store(0);
    auto error = enrich_error(ctx, std::current_exception(), elapsed_ms(started));
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(mu_);
      if (broken_.empty()) broken_ = e.what();
      logging::get("braid.collectives")->error("{}", e.what());
    }
    work.finish_with_error(error);
  }
}

std::exception_ptr QueuedProcessGroup::enrich_error(const OpContext& ctx, std::exception_ptr error, double elapsed) {
  try {
    std::rethrow_exception(error);
  } catch (const TimeoutError& e) {
    return std::make_exception_ptr(TimeoutError(
        fmt::format("{}: timed out after {:.0f} ms{} (engine: {})", ctx.what, elapsed, missing_ranks_report(ctx.seq),
                    e.what())));
  } catch (const Error& e) {
    if (std::string_view(e.what()).find(ctx.what) != std::string_view::npos) return error;
    return std::make_exception_ptr(CommError(fmt::format("{}: failed after {:.0f} ms: {}", ctx.what, elapsed, e.what())));
  } catch (const std::exception& e) {
    return std::make_exception_ptr(CommError(fmt::format("{}: failed after {:.0f} ms: {}", ctx.what, elapsed, e.what())));
  } catch (...) {
    return std::make_exception_ptr(CommError(fmt::format("{}: failed after {:.0f} ms with a non-standard exception",
                                                         ctx.what, elapsed)));
  }
}

// ---- Who never joined ----

void QueuedProcessGroup::monitor_loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    monitor_cv_.wait_for(lock, kMonitorTick);
    if (stopping_) break;
    uint64_t waiting = 0;
    const auto now = Clock::now().time_since_epoch().count();
    for (const auto& lane : lanes_) {
      const uint64_t seq = lane->running_seq.load();
      if (seq != 0 && now >= lane->publish_at.load()) waiting = std::max(waiting, seq);
    }
    if (waiting <= published_seq_) continue;
    published_seq_ = waiting;
    lock.unlock();
    try {
      config_.store->set(progress_key(rank()), store::to_bytes(std::to_string(waiting)));
    } catch (const std::exception& e) {
      logging::get("braid.collectives")->warn("group '{}': could not publish progress: {}", name(), e.what());
    }
    lock.lock();
  }
}

std::string QueuedProcessGroup::missing_ranks_report(uint64_t seq) {
  if (!config_.store) return "; the group has no store, so the ranks that did not join are unknown";
  std::vector<int> never;
  std::vector<std::string> behind;
  try {
    for (int r = 0; r < size(); ++r) {
      if (r == rank()) continue;
      const std::string key = progress_key(r);
      if (!config_.store->check({key})) {
        never.push_back(r);
        continue;
      }
      const uint64_t at = std::stoull(store::to_string(config_.store->get(key, Millis(1000))));
      if (at < seq) behind.push_back(fmt::format("{} (last waited in #{})", r, at));
    }
  } catch (const std::exception& e) {
    return fmt::format("; could not read the other ranks' progress: {}", e.what());
  }
  if (never.empty() && behind.empty()) return "; every rank entered this op (a peer may have failed inside it)";
  std::vector<std::string> parts;
  for (int r : never) parts.push_back(std::to_string(r));
  parts.insert(parts.end(), behind.begin(), behind.end());
  return fmt::format("; ranks that never joined it: {}", fmt::join(parts, ", "));
}

// ---- BRAID_DEBUG=DETAIL ----

void QueuedProcessGroup::check_fingerprint(const OpContext& ctx, const OpInfo& info) {
  const auto mine = static_cast<int64_t>(fnv1a(info.signature));
  Tensor local = Tensor::empty({1}, TensorOptions(DType::Int64, Device::cpu()));
  local.data<int64_t>()[0] = mine;
  Tensor all = Tensor::empty({size()}, TensorOptions(DType::Int64, Device::cpu()));
  if (info.device.is_cuda()) {
    Tensor l = local.to(info.device);
    Tensor a = all.to(info.device);
    run_allgather(l, a, ctx);
    all = a.to(Device::cpu());
  } else {
    run_allgather(local, all, ctx);
  }
  const auto* hashes = all.data<int64_t>();
  if (std::all_of(hashes, hashes + size(), [&](int64_t h) { return h == mine; })) return;
  if (!config_.store) {
    BRAID_THROW(CommError, "{}: BRAID_DEBUG=DETAIL: the ranks called different collectives or passed different "
                "shapes/dtypes (this rank: {})", ctx.what, info.signature);
  }
  const std::string prefix = fmt::format("braid/pg/{}/detail/{}/", name(), ctx.seq);
  config_.store->set(prefix + std::to_string(rank()), store::to_bytes(info.signature));
  std::vector<std::string> lines;
  for (int r = 0; r < size(); ++r) {
    if (hashes[r] == mine) continue;
    std::string theirs = "(did not say)";
    try {
      theirs = store::to_string(config_.store->get(prefix + std::to_string(r), ctx.deadline.remaining()));
    } catch (const std::exception&) {
    }
    lines.push_back(fmt::format("rank {}: {}", r, theirs));
  }
  BRAID_THROW(CommError, "{}: BRAID_DEBUG=DETAIL: ranks disagree on this collective. This rank ({}): {}; differing: {}",
              ctx.what, rank(), info.signature, fmt::join(lines, "; "));
}

// ---- barrier support ----

std::vector<std::shared_ptr<Work>> QueuedProcessGroup::incomplete_works() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::shared_ptr<Work>> out;
  for (const auto& w : in_flight_) {
    if (auto s = w.lock(); s && !s->is_completed()) out.push_back(std::move(s));
  }
  return out;
}

// ---- point to point ----

std::shared_ptr<Work> QueuedProcessGroup::post_p2p(const char* op, TensorList& tensors, int peer, int tag,
                                                    bool is_send) {
  const auto c = caller(op);
  if (tensors.size() != 1) checks::fail(c, fmt::format("requires a single-element tensor list, got {}", tensors.size()));
  checks::dense(c, tensors);
  checks::device(c, tensors, accepts_cuda(), accepts_cpu());
  // -1 means "any source" for recv_anysource only; send and recv name a real peer.
  const bool any_source = std::string_view(op) == "recv_anysource";
  if (!any_source) checks::dst_or_src_rank(c, peer, is_send ? "destination" : "source");
  if (peer == rank()) checks::fail(c, fmt::format("invalid {} rank: {} is this rank", is_send ? "destination" : "source", peer));
  if (tag < 0) checks::fail(c, fmt::format("invalid tag: {} (tags are non-negative)", tag));
  throw_if_unusable(op);
  const std::string what = peer == -1 ? fmt::format("{} (tag {}, any source) on group '{}' (rank {}/{}, {})", op, tag,
                                                    name(), rank(), size(), backend_name())
                                      : fmt::format("{} (peer {}, tag {}) on group '{}' (rank {}/{}, {})", op, peer, tag,
                                                    name(), rank(), size(), backend_name());
  auto work = std::make_shared<Work>(what, timeout());
  const Tensor user = tensors[0];
  const DType dtype = staging::move_dtype(user.dtype());
  const bool direct = user.is_contiguous() && user.dtype() == dtype;
  if (direct) {
    if (is_send) {
      post_send(user, peer, tag, work);
    } else {
      Tensor buf = user;
      post_recv(buf, peer, tag, work);
    }
    return work;
  }
  // Staged: the engine works on a packed copy; a recv copies back before the user's Work completes.
  Tensor buf = staging::as_buffer(user, dtype);
  auto inner = std::make_shared<Work>(what, timeout());
  inner->get_future().add_callback([work, inner, user, buf, is_send](const Future<TensorList>& f) {
    if (f.has_error()) {
      work->finish_with_error(f.error());
      return;
    }
    work->set_source_rank(inner->source_rank());
    if (!is_send) staging::copy_into(user, buf);
    work->finish({user});
  });
  if (is_send) {
    post_send(buf, peer, tag, inner);
  } else {
    post_recv(buf, peer, tag, inner);
  }
  return work;
}

std::shared_ptr<Work> QueuedProcessGroup::send(TensorList& tensors, int dst_rank, int tag) {
  return post_p2p("send", tensors, dst_rank, tag, true);
}

std::shared_ptr<Work> QueuedProcessGroup::recv(TensorList& tensors, int src_rank, int tag) {
  return post_p2p("recv", tensors, src_rank, tag, false);
}

std::shared_ptr<Work> QueuedProcessGroup::recv_anysource(TensorList& tensors, int tag) {
  return post_p2p("recv_anysource", tensors, -1, tag, false);
}

// ---- monitored_barrier ----

void QueuedProcessGroup::monitored_barrier(std::optional<Millis> timeout, bool wait_all_ranks) {
  const auto c = caller("monitored_barrier");
  if (!config_.store) checks::fail(c, "needs a store (create the group with one)");
  throw_if_unusable("monitored_barrier");
  const uint64_t n = monitored_barriers_.fetch_add(1) + 1;
  const Millis limit = timeout_for(timeout);
  const Deadline deadline = Deadline::after(limit);
  const std::string prefix = fmt::format("braid/pg/{}/monitored_barrier/{}/", name(), n);
  const std::string done_key = prefix + "done";
  if (rank() != 0) {
    config_.store->set(prefix + std::to_string(rank()), store::to_bytes("1"));
    std::string verdict;
    try {
      verdict = store::to_string(config_.store->get(done_key, deadline.remaining()));
    } catch (const TimeoutError&) {
      BRAID_THROW(TimeoutError, "monitored_barrier #{} on group '{}' (rank {}/{}): rank 0 did not finish the barrier "
                  "within {} ms", n, name(), rank(), size(), limit.count());
    }
    if (verdict != "ok") BRAID_THROW(CommError, "monitored_barrier #{} on group '{}' (rank {}/{}): {}", n, name(), rank(),
                                     size(), verdict);
    return;
  }
  std::vector<int> missing;
  for (int r = 1; r < size(); ++r) {
    const std::string key = prefix + std::to_string(r);
    if (!missing.empty()) {
      // Out of time already: the remaining ranks either checked in by now or they are missing too.
      if (!config_.store->check({key})) missing.push_back(r);
      continue;
    }
    try {
      config_.store->wait({key}, deadline.remaining());
    } catch (const TimeoutError&) {
      missing.push_back(r);
      if (!wait_all_ranks) break;
    }
  }
  if (missing.empty()) {
    config_.store->set(done_key, store::to_bytes("ok"));
    return;
  }
  const std::string message =
      missing.size() == 1 ? fmt::format("Rank {} failed to pass monitoredBarrier in {} ms", missing[0], limit.count())
                          : fmt::format("Ranks {} failed to pass monitoredBarrier in {} ms", fmt::join(missing, ", "),
                                        limit.count());
  config_.store->set(done_key, store::to_bytes(message));
  BRAID_THROW(CommError, "monitored_barrier #{} on group '{}' (rank 0/{}): {}", n, name(), size(), message);
}

bool QueuedProcessGroup::engine_reduces(DType dtype) const {
  return dtype != DType::Bool && dtype != DType::Float16 && dtype != DType::BFloat16;
}

}  // namespace braid::collectives
