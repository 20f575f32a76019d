// What every test file of the conformance suite includes: Catch2, the fixture, the expectation helpers
// and short names for the collectives' types.
#pragma once

#include <fmt/format.h>

#include <catch2/catch.hpp>

#include <memory>
#include <vector>

#include "collectives/core/options.h"
#include "collectives/core/process_group.h"
#include "collectives/core/reduce_op.h"
#include "collectives/core/work.h"
#include "tensor/factory.h"
#include "tensor/ops/elementwise.h"
#include "tensor/tensor.h"
#include "tests/mp/support/expect.h"
#include "tests/mp/support/mp_fixture.h"

namespace braid::mp {

using collectives::AllgatherOptions;
using collectives::AllreduceCoalescedOptions;
using collectives::AllreduceOptions;
using collectives::AllToAllOptions;
using collectives::BarrierOptions;
using collectives::BroadcastOptions;
using collectives::GatherOptions;
using collectives::ReduceOp;
using collectives::ReduceOptions;
using collectives::ReduceScatterOptions;
using collectives::ScatterOptions;

// Waits for `work` (within its group's timeout) and returns its future's value.
inline TensorList finish(const std::shared_ptr<Work>& work) {
  work->wait();
  return work->result();
}

// A column of a [n, 2] tensor: n elements with stride 2, as torch's noncontiguous tests
// build with t.expand(2, 2).contiguous()[:, 0].
inline Tensor column_view(const Tensor& values) {
  const int64_t n = values.numel();
  Tensor wide = empty({n, 2}, TensorOptions(values.dtype(), values.device()));
  wide.select(1, 0).copy_(values);
  wide.select(1, 1).fill_(-7);  // the other column must stay untouched
  Tensor col = wide.select(1, 0);
  return col;
}

}  // namespace braid::mp
