// Communication hooks: how DDP reduces one bucket of gradients (PyTorch's register_comm_hook).
//
// When every gradient of a bucket is ready, the Reducer flattens them into the bucket's buffer and calls
// the registered hook with a GradBucket. The hook starts the communication and returns a Future of the
// reduced buffer: a tensor with the buffer's shape and dtype (for a sparse bucket, a sparse tensor of the
// parameter's shape). The Reducer waits for all buckets' futures at the end of backward and writes the
// values back into the gradients. The buffer holds the local gradients **not** divided by the world
// size: a hook averages itself (the default hook, allreduce_hook, divides by the group size).
//
// Hooks run on the backward pass's thread, in bucket order; their futures may complete on any thread.
// A hook may change the buffer in place and return it.
//
// Built-in hooks (parallel/ddp/default_hooks.h): allreduce, fp16 and bf16 compression, quantization per
// tensor and per channel, noop, and PowerSGD (parallel/ddp/powersgd_hook.h).
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/future.h"
#include "tensor/tensor.h"

namespace braid::parallel {

class GradBucket {
 public:
  GradBucket(size_t index, size_t num_buckets, Tensor buffer, std::vector<Tensor> gradients,
             std::vector<Tensor> parameters, bool is_last)
      : index_(index), num_buckets_(num_buckets), buffer_(std::move(buffer)), gradients_(std::move(gradients)),
        parameters_(std::move(parameters)), is_last_(is_last) {}

  // The bucket's position in this iteration's reduction order (0 is reduced first).
  size_t index() const { return index_; }
  size_t num_buckets() const { return num_buckets_; }
  // The flat 1-D buffer of the bucket's gradients (dense buckets), or the one sparse gradient of a sparse
  // bucket.
  const Tensor& buffer() const { return buffer_; }
  // Replaces the buffer the Reducer reads back (PyTorch's set_buffer); the shape and dtype must match.
  void set_buffer(Tensor buffer) { buffer_ = std::move(buffer); }
  // Per-parameter views into buffer(), in the bucket's parameter order (the sparse gradient itself for a
  // sparse bucket).
  const std::vector<Tensor>& gradients() const { return gradients_; }
  const std::vector<Tensor>& parameters() const { return parameters_; }
  // True only for the bucket reduced last in this iteration.
  bool is_last() const { return is_last_; }

 private:
  size_t index_;
  size_t num_buckets_;
  Tensor buffer_;
  std::vector<Tensor> gradients_;
  std::vector<Tensor> parameters_;
  bool is_last_;
};

// A hook; its state (a process group, PowerSGD's matrices, ...) lives in the closure.
using CommHook = std::function<Future<Tensor>(GradBucket& bucket)>;

// A hook's state as named tensors, for a checkpoint.
using CommHookState = std::vector<std::pair<std::string, Tensor>>;

// A named hook: the name goes into DDP's logging data ("allreduce", "fp16_compress", "python hook"...).
// A hook that keeps state across iterations (PowerSGD's error feedback) gives the two functions that save
// and restore it, so that a job resumed from a checkpoint reduces exactly as an uninterrupted one; a
// stateless hook leaves them empty.
struct NamedCommHook {
  std::string name;
  CommHook hook;
  std::function<CommHookState()> state_dict = nullptr;
  std::function<void(const CommHookState&)> load_state_dict = nullptr;
};

// A buffer comm hook (PyTorch's _register_buffer_comm_hook): called instead of the broadcast of rank 0's
// buffers with DDP's buffers by name (the module's, less the ignored ones), it may reduce them any way it
// likes (sum a counter, average running statistics). It may wait itself and return nothing, or return the
// futures of its asynchronous work: the Reducer then waits for them at the end of the next backward
// (PyTorch's _install_post_backward_futures), so the communication overlaps the forward and backward.
// Every rank must issue the same collectives in the same order (iterate the map: its order is by name).
using BufferCommHook = std::function<std::vector<Future<Tensor>>(const std::map<std::string, Tensor>& named_buffers)>;

// When the buffer hook runs (PyTorch's _BufferCommHookLocation): before the forward, where the broadcast
// would run, or after it. With futures returned, kPostForward is the safe choice: a forward that reads
// the buffers while the hook's communication still writes them would race.
enum class BufferCommHookLocation { kPreForward, kPostForward };

}  // namespace braid::parallel
