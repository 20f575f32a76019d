// The Reducer: DDP's gradient synchronisation (PyTorch's C++ Reducer: buckets, the backward protocol,
// unused parameters, ignored outputs, sparse gradients, gradient_as_bucket_view, no_sync).
//
// Parameters are grouped into buckets; each bucket has one flat buffer per (dtype, device). Every
// parameter gets a post-accumulate-grad hook: when its gradient is accumulated during backward, the hook
// copies it into its bucket slot (unless the gradient already is a view of that slot) and marks it ready.
// A bucket whose parameters are all ready is handed to the comm hook (by default: divide by the world
// size, allreduce) **while backward goes on**; buckets are launched strictly in bucket order, so every rank
// issues the same collectives in the same order. When the last bucket is launched, a callback queued on
// the backward pass (autograd::queue_callback) waits for all of them and writes the averaged values back:
// into `.grad`, or into the distributed autograd context's entries (the gradient the hook saw is the one
// written), or — with gradient_as_bucket_view — `.grad` becomes a view of the bucket.
//
// Iteration protocol (DistributedDataParallel calls these):
//   prepare_for_forward()          checks that the previous backward finished its reduction and rebuilds
//                                  the buckets once, after the first iteration, in the order gradients
//                                  became ready there (rank 0's order, broadcast);
//   prepare_for_backward(outputs)  arms the hooks for the next backward; with find_unused_parameters it
//                                  walks the graph from `outputs` and marks the parameters it does not
//                                  reach ready at the first hook (their slots are zero);
// A backward that was not prepared (no_sync) leaves gradients local.
//
// Thread-safety: the hooks may fire on any thread (distributed autograd runs passes on RPC threads); the
// Reducer locks its state. One backward at a time per Reducer.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "collectives/core/process_group.h"
#include "parallel/ddp/comm_hook.h"
#include "tensor/tensor.h"

namespace braid::parallel {

struct ReducerOptions {
  bool find_unused_parameters = false;
  bool gradient_as_bucket_view = false;
  bool static_graph = false;
  size_t first_bucket_bytes = size_t{1} << 20;  // PyTorch's _DEFAULT_FIRST_BUCKET_BYTES
  size_t bucket_bytes_cap = size_t{25} << 20;   // bucket_cap_mb = 25
  // Mixed precision's reduce_dtype: buckets hold (and communicate) gradients in this floating dtype and
  // the results are cast back; unset: each bucket in its parameters' dtype. A bucket in another dtype than
  // its parameters cannot be their .grad, so gradient_as_bucket_view then copies.
  std::optional<DType> reduce_dtype;
};

// What DDP's logging data reports (PyTorch's _get_ddp_logging_data), for the last finished iteration.
struct ReducerStats {
  int64_t iteration = 0;               // backward passes reduced so far
  std::vector<size_t> bucket_bytes;    // current buckets, in reduction order
  int rebuilds = 0;                    // bucket rebuilds so far (0 or 1)
  std::string comm_hook = "builtin allreduce";
  double backward_compute_ms = 0;      // first gradient ready -> last gradient ready
  double comm_ms = 0;                  // first bucket launched -> all buckets reduced
  double overlap_fraction = 0;         // share of comm_ms that ran while backward was still computing
  std::vector<double> bucket_launch_ms;  // per bucket, launch time after the first gradient was ready
  // When the first and the last gradient of the last iteration were ready (steady_clock), so that callers
  // can place the launches on their own timeline (braid bench ddp: relative to the start of backward).
  std::chrono::steady_clock::time_point first_ready, last_ready;
  bool has_error = false;
  std::string error;
};

class Reducer : public std::enable_shared_from_this<Reducer> {
 public:
  // `bucket_indices`: parameter indices per bucket, in reduction order (bucket 0 is reduced first);
  // every parameter exactly once, one dtype and device per bucket (InvalidArgument naming the bucket and
  // both dtypes otherwise). `names`: for error messages (may be empty).
  static std::shared_ptr<Reducer> create(std::vector<Tensor> params, std::vector<std::string> names,
                                         std::vector<std::vector<size_t>> bucket_indices,
                                         std::shared_ptr<collectives::ProcessGroup> group,
                                         std::vector<bool> expect_sparse_gradient, ReducerOptions options);
  ~Reducer();
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  // Once: "register_comm_hook or register_builtin_comm_hook can only be called once."
  void register_comm_hook(NamedCommHook hook);

  void prepare_for_forward();
  void prepare_for_backward(const std::vector<Tensor>& outputs);

  // The futures of a buffer comm hook: waited for at the end of the next synced backward (PyTorch's
  // _install_post_backward_futures). Futures still pending from a forward that no backward followed are
  // waited for first.
  void install_post_backward_futures(std::vector<Future<Tensor>> futures);

  // What the averaging divides by (the world size; join changes it).
  void set_divisor(double divisor);
  // A joined rank's part in one iteration of the ranks still training (DDP join): the bucket rebuild
  // when it is due, every bucket's comm hook on zeros, in the current order, and the used-map allreduce.
  void join_shadow_iteration();
  std::vector<std::vector<size_t>> bucket_indices() const;
  // The buckets once rebuilt (nullopt before): what a checkpoint carries, so that a resumed job reduces in
  // the buckets an uninterrupted one would (a comm hook's memory is per bucket index).
  std::optional<std::vector<std::vector<size_t>>> rebuilt_bucket_indices() const;
  // Takes `buckets` as the rebuilt buckets, so that no rebuild follows. Between iterations only;
  // InvalidArgument for buckets that do not hold every parameter once, in one dtype and device each.
  void restore_rebuilt_buckets(const std::vector<std::vector<size_t>>& buckets);
  ReducerStats stats() const;
  bool expecting_hooks() const;

  // Records an error in the stats (DDP's logging data) and throws it.
  [[noreturn]] void log_and_throw(const std::string& message) const;

 private:
  struct Bucket {
    std::vector<size_t> variables;   // parameter indices, in slot order
    std::vector<Tensor> views;       // per variable, a view of `buffer` shaped like the parameter
    Tensor buffer;                   // flat 1-D; undefined for a sparse bucket
    bool sparse = false;
    Tensor sparse_grad;              // a sparse bucket's gradient this iteration
    size_t pending = 0;              // variables not yet ready this iteration
    std::optional<Future<Tensor>> result;
  };

  Reducer(std::vector<Tensor> params, std::vector<std::string> names, std::shared_ptr<collectives::ProcessGroup> group,
          std::vector<bool> expect_sparse_gradient, ReducerOptions options);
  void install_hooks();
  void build_buckets(const std::vector<std::vector<size_t>>& bucket_indices);  // caller holds mu_
  void attach_buffer(Bucket& bucket, Tensor buffer);  // the bucket's flat buffer and its per-parameter views
  void autograd_hook(size_t index, const Tensor& grad);
  void mark_variable_ready(size_t index, const Tensor& grad);  // caller holds mu_
  void launch_ready_buckets();                                   // caller holds mu_
  Future<Tensor> run_comm_hook(size_t b);                        // caller holds mu_
  void finalize_backward();
  void write_back(size_t b, const Tensor& reduced, const std::vector<int32_t>& global_used);
  bool hand_over_buffer(size_t b, const std::vector<int32_t>& global_used);  // caller holds mu_
  void rebuild_buckets();                                        // caller holds mu_
  std::vector<size_t> unready_variables() const;                 // caller holds mu_
  std::string describe(size_t index) const;

  const std::vector<Tensor> params_;
  const std::vector<std::string> names_;
  const std::shared_ptr<collectives::ProcessGroup> group_;
  const std::vector<bool> expect_sparse_;
  const ReducerOptions options_;

  mutable std::mutex mu_;
  std::vector<Bucket> buckets_;                     // GUARDED_BY(mu_)
  std::vector<std::pair<size_t, size_t>> locator_;  // per variable: (bucket, slot) GUARDED_BY(mu_)
  bool as_view_ = false;  // gradient_as_bucket_view and the buckets share the parameters' dtypes
  std::optional<NamedCommHook> hook_;               // GUARDED_BY(mu_)
  double divisor_;                                  // GUARDED_BY(mu_)
  std::vector<Future<Tensor>> post_backward_futures_;  // GUARDED_BY(mu_)

  // Per iteration (GUARDED_BY(mu_)).
  bool expect_hooks_ = false;          // prepare_for_backward armed the hooks
  bool require_finalize_ = false;      // a hook fired; finalize has not run
  bool finalize_queued_ = false;
  size_t next_bucket_ = 0;
  std::vector<bool> ready_;
  std::vector<Tensor> grads_;          // the gradient each hook saw (written back at finalize)
  std::vector<bool> had_grad_;         // .grad was defined when this backward was prepared
  std::vector<int32_t> local_used_;
  std::vector<size_t> unused_;         // locally unused (find_unused_parameters / static graph)
  bool marked_unused_ = false;
  std::optional<std::vector<size_t>> static_unused_;  // static_graph: found in the first iteration

  // Bucket rebuild (GUARDED_BY(mu_)).
  bool rebuilt_ = false;
  std::vector<size_t> ready_order_;    // first iteration: the order gradients became ready

  // Timing and stats (GUARDED_BY(mu_)).
  std::chrono::steady_clock::time_point first_ready_, last_ready_, first_launch_;
  std::vector<double> launch_ms_;
  mutable ReducerStats stats_;
};

}  // namespace braid::parallel
