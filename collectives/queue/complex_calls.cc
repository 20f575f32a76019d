#include "collectives/queue/complex_calls.h"

#include <fmt/format.h>

#include <optional>
#include <type_traits>

#include "tensor/complex.h"

namespace braid::collectives::complex_calls {
namespace {

bool complex(const Tensor& t) { return t.defined() && !t.is_sparse() && is_complex(t.dtype()); }
bool complex(const TensorList& ts) {
  for (const auto& t : ts) {
    if (complex(t)) return true;
  }
  return false;
}
bool complex(const std::vector<TensorList>& lists) {
  for (const auto& ts : lists) {
    if (complex(ts)) return true;
  }
  return false;
}

Tensor real_view(const Tensor& t) { return complex(t) ? view_as_real(t) : t; }
TensorList real_views(const TensorList& ts) {
  TensorList out;
  out.reserve(ts.size());
  for (const auto& t : ts) out.push_back(real_view(t));
  return out;
}
std::vector<TensorList> real_views(const std::vector<TensorList>& lists) {
  std::vector<TensorList> out;
  out.reserve(lists.size());
  for (const auto& ts : lists) out.push_back(real_views(ts));
  return out;
}

// The reduction of a call, if it reduces.
template <class C>
std::optional<ReduceOp> reduction(const C& c) {
  if constexpr (std::is_same_v<C, AllreduceCall> || std::is_same_v<C, AllreduceCoalescedCall> ||
                std::is_same_v<C, ReduceCall>) {
    return c.options.reduce_op;
  } else if constexpr (std::is_same_v<C, ReduceScatterCall> || std::is_same_v<C, ReduceScatterTensorCall> ||
                       std::is_same_v<C, ReduceScatterTensorCoalescedCall>) {
    return c.options.reduce_op;
  } else {
    return std::nullopt;
  }
}

bool defined_on_complex(ReduceOp op) {
  return op.kind == ReduceOp::SUM || op.kind == ReduceOp::AVG || op.kind == ReduceOp::PREMUL_SUM ||
         op.kind == ReduceOp::PRODUCT;
}

}  // namespace

bool any_complex(const Call& call) {
  return std::visit(
      [](const auto& c) -> bool {
        using C = std::decay_t<decltype(c)>;
        if constexpr (std::is_same_v<C, BarrierCall>) {
          return false;
        } else if constexpr (requires { c.tensors; }) {
          return complex(c.tensors);
        } else if constexpr (requires { c.output; }) {
          return complex(c.output) || complex(c.input);
        } else {
          return complex(c.outputs) || complex(c.inputs);
        }
      },
      call);
}

std::shared_ptr<Work> issue_with_real_views(const checks::Caller& caller, Call& call,
                                            const std::function<std::shared_ptr<Work>(Call&)>& issue) {
  return std::visit(
      [&](auto& c) -> std::shared_ptr<Work> {
        using C = std::decay_t<decltype(c)>;
        if (const auto op = reduction(c)) {
          if (!defined_on_complex(*op)) {
            checks::fail(caller, fmt::format("{} does not support {} on complex tensors", caller.op, *op));
          }
          if (op->kind == ReduceOp::PRODUCT) return issue(call);
        }
        // The viewed lists live on this frame: issue() copies what it keeps (core/calls.h).
        if constexpr (std::is_same_v<C, BarrierCall>) {
          return issue(call);
        } else if constexpr (std::is_same_v<C, SendCall>) {
          TensorList ts = real_views(c.tensors);
          Call next = SendCall{ts, c.dst_rank, c.tag};
          return issue(next);
        } else if constexpr (std::is_same_v<C, RecvCall>) {
          TensorList ts = real_views(c.tensors);
          Call next = RecvCall{ts, c.src_rank, c.tag};
          return issue(next);
        } else if constexpr (std::is_same_v<C, AlltoallSingleCall>) {
          // The splits count rows of dim 0, which the trailing parts dim leaves alone.
          Tensor out = real_view(c.output);
          Tensor in = real_view(c.input);
          Call next = AlltoallSingleCall{out, in, c.output_splits, c.input_splits, c.options};
          return issue(next);
        } else if constexpr (requires { c.tensors; }) {
          TensorList ts = real_views(c.tensors);
          Call next = C{ts, c.options};
          return issue(next);
        } else if constexpr (requires { c.output; }) {
          Tensor out = real_view(c.output);
          Tensor in = real_view(c.input);
          Call next = C{out, in, c.options};
          return issue(next);
        } else {
          auto outs = real_views(c.outputs);
          auto ins = real_views(c.inputs);
          Call next = C{outs, ins, c.options};
          return issue(next);
        }
      },
      call);
}

}  // namespace braid::collectives::complex_calls
