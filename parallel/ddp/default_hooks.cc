// allreduce, fp16/bf16 compression and noop hooks (PyTorch's default_hooks.py). The quantization hooks
// are in quantization_hooks.cc.
#include "parallel/ddp/default_hooks.h"

#include <fmt/format.h>

#include <string>
#include <utility>

#include "base/check.h"
#include "tensor/ops/elementwise.h"
#include "tensor/sparse.h"

namespace braid::parallel {

using collectives::ProcessGroup;
using collectives::TensorList;

namespace {

// The buffer cast to `dtype`, divided by ws, allreduced, and cast back into the buffer (PyTorch's
// fp16_compress_hook / bf16_compress_hook: dividing after the cast, in the narrow type, as they do).
Future<Tensor> compressed_allreduce(ProcessGroup& group, const GradBucket& bucket, DType dtype, const char* hook) {
  const Tensor buffer = bucket.buffer();
  BRAID_CHECK_ARG(!buffer.is_sparse(), "{}: bucket {} holds a sparse gradient ({}); compression needs a dense bucket",
                  hook, bucket.index(), buffer.describe());
  // A buffer already of `dtype` is used as it is (to() returns it), as PyTorch's .to() does.
  Tensor compressed = buffer.to(dtype);
  binary_(BinaryOp::Div, compressed, Scalar(group.size()));
  TensorList list{compressed};
  auto work = group.allreduce(list);
  return work->get_future().then(
      [buffer](const TensorList& out) {
        const Tensor& reduced = out.at(0);
        if (!reduced.is_same(buffer)) buffer.copy_(reduced);
        return buffer;
      },
      fmt::format("{} of bucket {}", hook, bucket.index()));
}

}  // namespace

namespace detail {

std::shared_ptr<ProcessGroup> checked_group(std::shared_ptr<ProcessGroup> group, const char* hook) {
  BRAID_CHECK_ARG(group != nullptr, "{}: the process group must not be null", hook);
  return group;
}

Future<Tensor> allreduce_average(ProcessGroup& group, const Tensor& buffer) {
  const int ws = group.size();
  TensorList list;
  if (buffer.is_sparse()) {
    // A new sparse tensor: the bucket's sparse gradient may be the parameter's .grad itself, which the
    // hook must not rescale behind the Reducer's back.
    const SparseTensor& s = buffer.sparse();
    list.push_back(SparseTensor(s.indices(), div(s.values(), Scalar(ws)), s.shape(), s.is_coalesced()).to_tensor());
  } else {
    binary_(BinaryOp::Div, buffer, Scalar(ws));
    list.push_back(buffer);
  }
  auto work = group.allreduce(list);
  return work->get_future().then([](const TensorList& out) { return out.at(0); }, work->what());
}

}  // namespace detail

NamedCommHook allreduce_hook(std::shared_ptr<ProcessGroup> group) {
  group = detail::checked_group(std::move(group), "allreduce_hook");
  return {"allreduce", [group](GradBucket& bucket) { return detail::allreduce_average(*group, bucket.buffer()); }};
}

NamedCommHook fp16_compress_hook(std::shared_ptr<ProcessGroup> group) {
  group = detail::checked_group(std::move(group), "fp16_compress_hook");
  return {"fp16_compress", [group](GradBucket& bucket) {
            return compressed_allreduce(*group, bucket, DType::Float16, "fp16_compress_hook");
          }};
}

NamedCommHook bf16_compress_hook(std::shared_ptr<ProcessGroup> group) {
  group = detail::checked_group(std::move(group), "bf16_compress_hook");
  return {"bf16_compress", [group](GradBucket& bucket) {
            return compressed_allreduce(*group, bucket, DType::BFloat16, "bf16_compress_hook");
          }};
}

NamedCommHook noop_hook() {
  return {"noop", [](GradBucket& bucket) {
            Future<Tensor> done(fmt::format("noop_hook of bucket {}", bucket.index()));
            done.set_value(bucket.buffer());
            return done;
          }};
}

}  // namespace braid::parallel
