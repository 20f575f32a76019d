#include "nn/optim/sgd.h"

#include <cmath>

#include "base/check.h"
#include "tensor/factory.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/shape_ops.h"
#include "tensor/sparse.h"

namespace braid::nn::optim {
namespace {

template <class T>
void momentum_step_loop(T* param, T* buf, const T* d, int64_t n, T momentum, T neg_lr) {
  for (int64_t i = 0; i < n; ++i) {
    const T b = d[i] + momentum * buf[i];
    buf[i] = b;
    param[i] = param[i] + neg_lr * b;
  }
}

// buf = d + momentum * buf, then param += -lr * buf, in one pass over memory for contiguous float32/float64
// CPU tensors of one shape and dtype (the common case, and a memory-bound one: five streams instead of the
// six of two passes). The roundings are those of the two binary ops it replaces. False: not taken.
bool fused_momentum_step(const Tensor& param, const Tensor& buf, const Tensor& d, double momentum, double lr) {
  const bool direct = param.device().is_cpu() && buf.device().is_cpu() && d.device().is_cpu() &&
                      param.dtype() == buf.dtype() && param.dtype() == d.dtype() && param.is_contiguous() &&
                      buf.is_contiguous() && d.is_contiguous() && param.shape() == buf.shape() &&
                      param.shape() == d.shape();
  if (!direct) return false;
  if (param.dtype() == DType::Float32) {
    momentum_step_loop(param.data<float>(), buf.data<float>(), d.data<float>(), param.numel(),
                       static_cast<float>(momentum), static_cast<float>(-lr));
    return true;
  }
  if (param.dtype() == DType::Float64) {
    momentum_step_loop(param.data<double>(), buf.data<double>(), d.data<double>(), param.numel(), momentum, -lr);
    return true;
  }
  return false;
}

void validate(const SGDOptions& o) {
  BRAID_CHECK_ARG(!std::isnan(o.lr), "SGD: the learning rate is required (set SGDOptions::lr)");
  BRAID_CHECK_ARG(o.lr >= 0.0, "SGD: Invalid learning rate: {}", o.lr);
  BRAID_CHECK_ARG(o.momentum >= 0.0, "SGD: Invalid momentum value: {}", o.momentum);
  BRAID_CHECK_ARG(o.weight_decay >= 0.0, "SGD: Invalid weight_decay value: {}", o.weight_decay);
  BRAID_CHECK_ARG(!o.nesterov || (o.momentum > 0.0 && o.dampening == 0.0),
                  "SGD: Nesterov momentum requires a momentum and zero dampening (momentum {}, dampening {})",
                  o.momentum, o.dampening);
}

// `base` with the given entries replaced; an unknown name is an error.
SGDOptions with_entries(SGDOptions o, const std::map<std::string, double>& entries) {
  for (const auto& [name, v] : entries) {
    if (name == "lr") o.lr = v;
    else if (name == "momentum") o.momentum = v;
    else if (name == "dampening") o.dampening = v;
    else if (name == "weight_decay") o.weight_decay = v;
    else if (name == "nesterov") o.nesterov = v != 0.0;
    else if (name == "maximize") o.maximize = v != 0.0;
    else BRAID_THROW(InvalidArgument, "SGD: load_state_dict: unknown option '{}'", name);
  }
  return o;
}

}  // namespace

SGD::SGD(TensorList params, SGDOptions options) : Optimizer("SGD", std::move(params), {}), options_(options) {
  validate(options_);
}

SGD::SGD(const std::vector<std::pair<std::string, Tensor>>& named_params, SGDOptions options)
    : Optimizer("SGD", tensors_of(named_params), names_of(named_params)), options_(options) {
  validate(options_);
}

void SGD::set_lr(double lr) {
  SGDOptions o = options_;
  o.lr = lr;
  validate(o);
  options_ = o;
}

std::map<std::string, double> SGD::options_map() const {
  return {{"lr", options_.lr},
          {"momentum", options_.momentum},
          {"dampening", options_.dampening},
          {"weight_decay", options_.weight_decay},
          {"nesterov", options_.nesterov ? 1.0 : 0.0},
          {"maximize", options_.maximize ? 1.0 : 0.0}};
}

void SGD::check_options(const std::map<std::string, double>& options) const {
  validate(with_entries(options_, options));
}

void SGD::set_options(const std::map<std::string, double>& options) { options_ = with_entries(options_, options); }

void SGD::update(size_t index, const Tensor& param, const Tensor& grad, ParamState& state) {
  if (grad.is_sparse()) return update_sparse(index, param, grad);
  const SGDOptions& o = options_;
  Tensor d_p = o.maximize ? braid::neg(grad) : grad;
  if (o.weight_decay != 0.0) d_p = braid::add(d_p, param, o.weight_decay);
  if (o.momentum != 0.0) {
    auto it = state.find("momentum_buffer");
    Tensor buf;
    if (it == state.end()) {
      // PyTorch starts the buffer at the first (decayed) gradient, not at zero: no dampening on step 1.
      buf = d_p.clone();
      state["momentum_buffer"] = buf;
    } else if (o.dampening == 0.0) {
      // buf = d + momentum * buf in one pass over memory instead of mul_ then add_: the step is memory-bound
      // and this is a third of its traffic. Same roundings as PyTorch's buf*m + d (fl(d + fl(m*buf))).
      buf = it->second;
      if (!o.nesterov && fused_momentum_step(param, buf, d_p, o.momentum, o.lr)) return;
      braid::binary_out(BinaryOp::Add, buf, d_p, buf, o.momentum);
    } else {
      buf = it->second;
      buf.mul_(o.momentum).add_(d_p, 1.0 - o.dampening);
    }
    d_p = o.nesterov ? braid::add(d_p, buf, o.momentum) : buf;
  }
  param.add_(d_p, -o.lr);
}

void SGD::update_sparse(size_t index, const Tensor& param, const Tensor& grad) {
  const SGDOptions& o = options_;
  // A dense momentum buffer would touch every row on every step, defeating sparse gradients; PyTorch's
  // sparse buffer grows without bound instead. Neither is wanted here, so both are refused up front.
  BRAID_CHECK_ARG(o.momentum == 0.0,
                  "SGD does not support momentum with sparse gradients ({} got a sparse gradient; momentum is {}): "
                  "use momentum=0 or a dense gradient",
                  describe_param(index), o.momentum);
  BRAID_CHECK_ARG(o.weight_decay == 0.0,
                  "SGD does not support weight_decay with sparse gradients ({} got a sparse gradient; weight_decay is "
                  "{}): use weight_decay=0 or a dense gradient",
                  describe_param(index), o.weight_decay);
  add_sparse_(param, grad, o.maximize ? o.lr : -o.lr);
}

void add_sparse_(const Tensor& param, const Tensor& sparse, double alpha) {
  BRAID_CHECK_ARG(sparse.is_sparse(), "add_sparse_: expected a sparse tensor, got {}", sparse.describe());
  BRAID_CHECK_ARG(sparse.shape() == param.shape(), "add_sparse_: sparse tensor of shape {} for a tensor of shape {}",
                  shape_str(sparse.shape()), shape_str(param.shape()));
  // Coalesced: one entry per row, so each row gets alpha * (sum of its contributions) in one add.
  const SparseTensor sp = sparse.sparse().coalesce();
  const int64_t nnz = sp.nnz();
  if (nnz == 0) return;
  const int64_t sd = sp.sparse_dim();
  const Tensor idx = sp.indices().cpu().contiguous();  // [sd, nnz]
  const int64_t* ix = idx.data<int64_t>();
  const Tensor values = sp.values().to(param.dtype()).to(param.device());

  if (param.device().is_cpu() && param.is_contiguous()) {
    // View the parameter as [rows, row_size] (rows = the sparse dims linearised) and scatter-add every
    // scaled value row at once: one pass over the touched rows, none over the others.
    int64_t rows = 1;
    for (int64_t d = 0; d < sd; ++d) rows *= param.size(d);
    const int64_t row_size = param.numel() / rows;
    Tensor row_index = Tensor::empty({nnz, 1}, DType::Int64);
    int64_t* out = row_index.data<int64_t>();
    for (int64_t j = 0; j < nnz; ++j) {
      int64_t r = 0;
      for (int64_t d = 0; d < sd; ++d) r = r * param.size(d) + ix[d * nnz + j];
      out[j] = r;
    }
    const Tensor scaled = braid::mul(values.reshape({nnz, row_size}), alpha);
    braid::scatter_add_(param.view({rows, row_size}), 0, row_index.expand({nnz, row_size}), scaled);
    return;
  }
  // Strided or device parameters: one in-place add per entry on a view of its row.
  for (int64_t j = 0; j < nnz; ++j) {
    Tensor row = param;
    for (int64_t d = 0; d < sd; ++d) row = row.select(0, ix[d * nnz + j]);
    row.add_(values.select(0, j), alpha);
  }
}

}  // namespace braid::nn::optim
