// dst = src * scale, written with non-temporal (streaming) stores where the CPU has them.
//
// For data that is large and not read again soon — DDP's gradients on their way into a bucket that the
// communication engine reads later, and the averaged bucket on its way back into .grad — ordinary stores
// first read every destination line into the cache (read for ownership) and then evict it again: a third
// stream of memory traffic on a pass that is memory-bound. Streaming stores skip that read: a 64 MiB
// float32 scaled copy takes 7 ms instead of 11 ms on the 2-core VM of docs/PERFORMANCE.md ("DDP").
// Do not use it for data the caller reads right back: the stores bypass the cache.
#pragma once

#include "tensor/tensor.h"

namespace braid {

// dst = src * scale (scale 1: a plain copy); dst and src are the same tensor or do not overlap. Contiguous
// CPU tensors of one floating dtype (float32, float64) and one shape take the streaming loop; anything else (other dtypes, strides, devices, a
// dtype conversion) goes through dst.copy_(src) and, when scale != 1, dst.mul_(scale).
void copy_scaled_streaming(const Tensor& dst, const Tensor& src, double scale = 1.0);

}  // namespace braid
