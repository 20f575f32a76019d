#include "tensor/loop.h"

namespace braid::detail {

Shape broadcast_strides(const Tensor& t, const Shape& shape) {
  const int64_t nd = static_cast<int64_t>(shape.size());
  const int64_t td = t.dim();
  BRAID_ASSERT(td <= nd, "tensor {} does not broadcast to {}", t.describe(), shape_str(shape));
  Shape out(shape.size(), 0);
  for (int64_t i = 0; i < td; ++i) {
    const int64_t o = i + (nd - td);
    const int64_t s = t.shape()[i];
    BRAID_ASSERT(s == shape[o] || s == 1, "tensor {} does not broadcast to {}", t.describe(), shape_str(shape));
    out[o] = (s == 1 && shape[o] != 1) ? 0 : t.strides()[i];
  }
  return out;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op, const Tensor* ta, const Tensor* tb) {
  const size_t nd = std::max(a.size(), b.size());
  Shape out(nd);
  for (size_t i = 0; i < nd; ++i) {
    const int64_t da = i + a.size() >= nd ? a[i + a.size() - nd] : 1;
    const int64_t db = i + b.size() >= nd ? b[i + b.size() - nd] : 1;
    if (da == db || db == 1) {
      out[i] = da;
    } else if (da == 1) {
      out[i] = db;
    } else {
      BRAID_THROW(InvalidArgument,
                  "{}: The size of tensor a ({}) must match the size of tensor b ({}) at non-singleton dimension "
                  "{} (operands {} and {})",
                  op, da, db, i, ta ? ta->describe() : shape_str(a), tb ? tb->describe() : shape_str(b));
    }
  }
  return out;
}

}  // namespace braid::detail
