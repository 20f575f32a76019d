// The distributed autograd benchmark behind `braid bench dist-autograd`: the price of a backward pass
// that crosses processes. bench/torch_dist_autograd.py times the same thing with PyTorch's
// torch.distributed.autograd and prints the same table; bench/run_dist_autograd_bench.sh runs both and
// prints the ratios; docs/PERFORMANCE.md has the measured tables.
//
// Model: one Linear(features, features) with bias, weights drawn by nn::Linear from Generator(seed).
// worker1 owns it as an instance of the rpc class "bench.RemoteLinear" that worker0 creates with
// rpc::remote. Two rows, timed on worker0 in the same process, interleaved (one local iteration, then
// one distributed one, and so on) so that both see the same machine load:
//   local        the same Linear built on worker0 from the same seed:
//                  out = linear(x, W, b); loss = sum(out); grad(loss, {x, W, b})
//   distributed  { dist_autograd::Context ctx;
//                  out = rref.rpc_sync().call("forward", {x});          // x crosses, out comes back
//                  loss = sum(out);
//                  dist_autograd::backward(ctx.id(), {loss});           // d out goes, d x comes back
//                  grads = dist_autograd::get_gradients(ctx.id()); }    // released here, on both workers
// with x a (batch, features) float32 leaf that requires grad, made once: four tensors of batch x features
// x 4 bytes cross the wire per iteration, plus the release. Each phase of an iteration is timed too
// (forward, backward, gradients, release), for "where the time goes".
//
// Before the timing, one distributed iteration's gradients (x's on worker0, W's and b's fetched from
// worker1's context) are compared with the local ones (allclose); a mismatch fails the run.
//
// Launch: as `braid bench rpc` — under mpirun the store comes from collectives/mpi's bootstrap, otherwise
// from store::rendezvous (init_method, env:// by default). Exactly 2 processes; worker1 calls
// rpc::shutdown() (graceful) right after init_rpc and serves until worker0 has finished.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace braid::rpc {
class Registry;
struct WorkerInfo;
}  // namespace braid::rpc

namespace braid::bench {

// The rpc class of the benchmark's model (register_dist_autograd_bench_classes).
inline constexpr const char* kDistAutogradBenchModel = "bench.RemoteLinear";

struct DistAutogradBenchOptions {
  std::string transport = "auto";  // "auto" (ucx when built with it, else tcp), "tcp" or "ucx"
  int iters = 200;                // timed iterations per row
  int warmup = 5;                 // untimed iterations per row, before the timed ones
  int64_t batch = 64;
  int64_t features = 1024;
  int threads = 1;                // OpenBLAS threads of each process (PyTorch's side: torch.set_num_threads)
  int rpc_threads = 4;            // num_worker_threads of each agent
  uint64_t seed = 0;              // of the weights (and of x, from seed + 1)
  // The rpc class the owner builds the model from: constructor (in, out, seed), methods "forward"(x) and
  // "gradients"(context id) -> [dW, db]. Tests swap in a wrong model to see the gradient check fail.
  std::string model_class = kDistAutogradBenchModel;
  std::string init_method;        // "" = mpirun's bootstrap under mpirun, else env://
  int timeout_s = 300;            // rpc timeout, join and graceful-shutdown timeout (bounds the whole run)
  int timeline = 50;              // traced distributed iterations after the timed rows (0: none)
};

// One row: per-iteration wall times and the mean time of each phase, in milliseconds.
struct DistAutogradBenchRow {
  std::string mode;  // "local" or "distributed"
  int64_t iters = 0;
  double mean_ms = 0, p50_ms = 0, min_ms = 0, max_ms = 0;
  // Means per iteration. forward: linear (local) or the forward RPC (distributed), sum included;
  // backward: grad() (local) or dist_autograd::backward; gradients: get_gradients (distributed only);
  // release: leaving the context, which releases it on worker1 too (distributed only).
  double forward_ms = 0, backward_ms = 0, gradients_ms = 0, release_ms = 0;
};

// The result of the gradient check: the largest |distributed - local| over x's, W's and b's gradients.
struct DistAutogradGradCheck {
  bool ok = false;
  double max_abs_diff = 0;
  std::string detail;  // which gradient differed, when one did
};

// One segment of a traced distributed iteration: from one timestamp to the next, over the traced iterations.
struct DistAutogradSegment {
  std::string key;    // for the RESULT line: "x_to_owner", "owner_forward", ...
  std::string what;   // for the table: "x to the owner"
  std::string where;  // "wire" (a transfer and the wake-ups around it), "worker0", "worker1", ...
  double mean_ms = 0, p50_ms = 0;
};

// Where a distributed iteration's time goes: timestamps taken on both workers (steady_clock, i.e. one
// CLOCK_MONOTONIC for the machine: both workers must run on one host), by hooks on the tensors of
// `timeline` more distributed iterations run after the timed rows. Segments, in order (their means add up
// to the mean iteration):
//   x_to_owner       the forward call issued on worker0 -> the forward method starts on the owner
//   owner_forward    the forward method on the owner (linear)
//   out_back         the forward method returns -> the call returns on worker0
//   sum              sum(out) on worker0
//   dout_to_owner    backward called -> d out reaches the owner's graph (a pre-hook on out's node)
//   owner_backward   d out -> d x about to be sent by the owner (LinearBackward, and d W, d b accumulated
//                    in the context when the engine runs their accumulators first)
//   dx_back          d x about to be sent -> accumulated in worker0's context
//   backward_done    -> dist_autograd::backward returns (the replies that end the propagation)
//   gradients        get_gradients
//   release          leaving the context (released on the owner too)
// and, beside the path, the owner's backward in detail:
//   owner_linear_backward   d out -> the first of d W, d b reaches its accumulator (LinearBackward's GEMMs)
//   owner_accumulate        -> both accumulated in the context (the context's copies of d W and d b)
//   owner_params_to_dx      -> d x about to be sent (negative when d x leaves before the accumulations end)
struct DistAutogradTimeline {
  int64_t iters = 0;
  std::vector<DistAutogradSegment> segments;
  std::vector<DistAutogradSegment> aside;
  double total_ms() const;  // the sum of the segments' means
  // The segment named `key`; InvalidArgument when there is none.
  const DistAutogradSegment& at(const std::string& key) const;
};

struct DistAutogradBenchReport {
  std::string transport;
  int64_t batch = 0, features = 0;
  int threads = 0, rpc_threads = 0;
  DistAutogradGradCheck check;
  std::vector<DistAutogradBenchRow> rows;  // local, then distributed
  std::optional<DistAutogradTimeline> timeline;  // when options.timeline > 0
  std::string timeline_note;                     // why there is none although asked for
  // p50 of the distributed row over p50 of the local row; empty without both rows.
  std::optional<double> ratio() const;
  // The same with each row's fastest iteration: the figure least moved by other programs on a loaded
  // machine (printed beside the target's ratio, not judged).
  std::optional<double> ratio_min() const;
};

// braid's target: distributed <= 1.15 x local (by p50, the figure least moved by other programs'
// bursts on a shared machine).
inline constexpr double kDistAutogradTargetRatio = 1.15;

// Summary of per-iteration times in milliseconds: mean, nearest-rank p50, min, max. InvalidArgument when
// `samples_ms` is empty.
DistAutogradBenchRow summarize_iterations(std::string mode, std::vector<double> samples_ms);

// Registers the class kDistAutogradBenchModel: constructor (in, out, seed) builds nn::Linear(in, out, bias)
// from Generator(seed); "forward"(x) returns linear(x); "gradients"(context id) returns [dW, db] from that
// context's gradient map on the owner; "forward_traced"(x) is forward with timestamps (and hooks that take
// more in the backward pass) kept for "trace"(), which returns them and the owner's host name. Left alone
// when already present.
void register_dist_autograd_bench_classes(rpc::Registry& registry);

// The caller's side, on the process's RPC agent (rpc::init_rpc must have run; dist_autograd needs the
// global agent): creates the model on `owner` (worker1; the caller itself in a one-worker job), checks the
// gradients, then times both rows, passing each to `on_row` when it is done. Throws InvalidArgument on bad
// options and InternalError when the gradients differ.
DistAutogradBenchReport run_dist_autograd_bench_caller(
    const rpc::WorkerInfo& owner, const DistAutogradBenchOptions& o,
    const std::function<void(const DistAutogradBenchReport&, const DistAutogradBenchRow&)>& on_row = {});

// The table: a header, one line per row, and the ratio against the target. RESULT lines, one per row:
//   RESULT dist_autograd transport=tcp mode=local batch=64 features=1024 iters=50 mean_ms=.. p50_ms=..
//          min_ms=.. max_ms=.. forward_ms=.. backward_ms=.. gradients_ms=.. release_ms=.. threads=1
//          rpc_threads=4
// and, on the distributed row, ratio=.. ratio_min=.. target=ratio<=1.15 met=0|1.
std::string format_dist_autograd_bench_header(const DistAutogradBenchOptions& o);
std::string format_dist_autograd_bench_row(const DistAutogradBenchRow& row);
std::string format_dist_autograd_bench_footer(const DistAutogradBenchReport& report);
std::string format_dist_autograd_bench_table(const DistAutogradBenchReport& report, const DistAutogradBenchOptions& o);
std::string format_dist_autograd_bench_results(const DistAutogradBenchReport& report);
// The timeline as a table ("# where the time goes ...") and as one line (means, then p50s):
//   RESULT dist_autograd_timeline transport=tcp iters=20 x_to_owner_ms=.. ... release_ms=.. total_ms=..
//          owner_linear_backward_ms=.. ... x_to_owner_p50_ms=.. ... owner_params_to_dx_p50_ms=..
std::string format_dist_autograd_timeline(const DistAutogradBenchReport& report);

// The whole benchmark on this process (2 processes, see above). Rank 0 passes the preamble, the table and
// the RESULT lines to `emit`; rank 1 emits nothing and returns an empty report.
DistAutogradBenchReport run_dist_autograd_bench(const DistAutogradBenchOptions& options,
                                                const std::function<void(const std::string&)>& emit);

}  // namespace braid::bench
