#include "runtime/run/grad_dump.h"

#include "base/check.h"
#include "tensor/factory.h"

namespace braid::runtime {

namespace {

nlohmann::ordered_json nest(const std::vector<double>& values, const Shape& shape, size_t dim, size_t& at) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (int64_t i = 0; i < shape[dim]; ++i) {
    if (dim + 1 == shape.size()) out.push_back(values[at++]);
    else out.push_back(nest(values, shape, dim + 1, at));
  }
  return out;
}

}  // namespace

nlohmann::ordered_json tensor_to_json(const Tensor& t) {
  const std::vector<double> values = to_vector<double>(t.to(DType::Float64).contiguous());
  if (t.shape().empty()) return values.at(0);
  size_t at = 0;
  return nest(values, t.shape(), 0, at);
}

GradDumpWriter::GradDumpWriter(const std::string& path) : path_(path), out_(path, std::ios::trunc) {
  BRAID_CHECK_ARG(out_.good(), "--dump-grads: cannot write '{}'", path);
}

void GradDumpWriter::write(int rank, int64_t step, int64_t microbatch, double loss, const rpc::Dict& grads) {
  nlohmann::ordered_json g = nlohmann::ordered_json::object();
  for (const auto& [name, v] : grads.items) g[name] = tensor_to_json(v.as_tensor());
  nlohmann::ordered_json line{{"rank", rank}, {"step", step}, {"microbatch", microbatch}, {"loss", loss}, {"grads", g}};
  out_ << line.dump() << '\n';
  out_.flush();
  BRAID_CHECK_ARG(out_.good(), "--dump-grads: writing '{}' failed", path_);
}

}  // namespace braid::runtime
