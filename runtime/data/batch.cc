// Batch: rows and row ranges of a batch's tensors.
#include "base/check.h"
#include "runtime/data/dataset.h"

namespace braid::runtime {

int64_t Batch::size() const {
  // Every tensor of a batch has the same rows; the target is the one every kind of data has.
  if (target.defined()) return target.size(0);
  if (!inputs.empty() && inputs.front().defined()) return inputs.front().size(0);
  return 0;
}

Batch Batch::slice(int64_t begin, int64_t end) const {
  const int64_t rows = size();
  BRAID_CHECK_ARG(0 <= begin && begin <= end && end <= rows,
                  "Batch::slice: rows [{}, {}) are not within the batch's {} rows", begin, end, rows);
  Batch out;
  out.inputs.reserve(inputs.size());
  for (const Tensor& t : inputs) out.inputs.push_back(t.narrow(0, begin, end - begin));
  if (target.defined()) out.target = target.narrow(0, begin, end - begin);
  return out;
}

Batch Batch::to(Device device) const {
  Batch out;
  out.inputs.reserve(inputs.size());
  for (const Tensor& t : inputs) out.inputs.push_back(t.defined() ? t.to(device) : t);
  if (target.defined()) out.target = target.to(device);
  return out;
}

}  // namespace braid::runtime
