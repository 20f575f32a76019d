// DDP's built-in communication hooks (PyTorch's torch.distributed.algorithms.ddp_comm_hooks: default_hooks
// and quantization_hooks), as factories that bind a process group into a NamedCommHook.
//
// Every hook averages over the group: the bucket's buffer holds local gradients not divided by the world
// size (comm_hook.h). Each returns a future of a tensor with the buffer's shape and dtype:
//   allreduce_hook            buffer /= ws, allreduce SUM in place, future of the buffer. A sparse buffer
//                             goes through the sparse allreduce: the future holds a new sparse tensor (the
//                             buffer is left as it was).
//   fp16_compress_hook        buffer -> float16, /= ws (in float16), allreduce, cast back into the buffer.
//   bf16_compress_hook        the same with bfloat16.
//   quantize_per_tensor_hook  uint8 affine quantization with one (scale, zero point) per rank, taken from
//                             the buffer's min/max as torch's MinMaxObserver does; the ranks allgather their
//                             scales and quantized buffers, each rank dequantizes every copy with its owner's
//                             scale, sums them and divides by ws; written back into the buffer.
//   quantize_per_channel_hook the same per row of `bucket_size` elements (the buffer zero-padded to whole
//                             rows), one (scale, zero point) per row (PerChannelMinMaxObserver).
//   noop_hook                 no communication: a completed future of the buffer as it is.
//
// Ordering: every collective a hook issues is issued from the calling thread, in the hook call, so the
// ranks' op sequences on the group stay identical however fast each collective completes (issuing from a
// completion callback could interleave differently with the next bucket's ops on different ranks). The
// quantization hooks can do this without blocking because a rank quantizes with its *own* scale, known
// before any communication: both allgathers are issued at once and the dequantization runs when both
// have completed. No hook here blocks.
//
// Device-agnostic: they use tensor ops only, so they run wherever the buffer's tensor ops run (CPU; CUDA
// where braid's CUDA kernels cover the ops used: casts, elementwise, min/max).
#pragma once

#include <cstdint>
#include <memory>

#include "collectives/core/process_group.h"
#include "parallel/ddp/comm_hook.h"

namespace braid::parallel {

// Each factory throws InvalidArgument for a null group.
NamedCommHook allreduce_hook(std::shared_ptr<collectives::ProcessGroup> group);
NamedCommHook fp16_compress_hook(std::shared_ptr<collectives::ProcessGroup> group);
NamedCommHook bf16_compress_hook(std::shared_ptr<collectives::ProcessGroup> group);
NamedCommHook quantize_per_tensor_hook(std::shared_ptr<collectives::ProcessGroup> group);
// bucket_size: the number of buffer elements per quantization channel (> 0).
NamedCommHook quantize_per_channel_hook(std::shared_ptr<collectives::ProcessGroup> group, int64_t bucket_size = 512);
NamedCommHook noop_hook();

namespace detail {

// `group`, or InvalidArgument naming `hook` when it is null.
std::shared_ptr<collectives::ProcessGroup> checked_group(std::shared_ptr<collectives::ProcessGroup> group,
                                                         const char* hook);

// buffer /= ws (dense: in place), then an async allreduce SUM; the future holds the reduced tensor (the
// buffer itself when dense). Shared by allreduce_hook and PowerSGD's first iterations.
Future<Tensor> allreduce_average(collectives::ProcessGroup& group, const Tensor& buffer);

}  // namespace detail

}  // namespace braid::parallel
