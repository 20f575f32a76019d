// `braid run --dump-grads FILE`: JSON lines for comparing a job with reference runs, one object per
// trainer, step and micro-batch:
//   {"rank": 0, "step": 1, "microbatch": 0, "loss": -3.5, "grads": {"fc1.weight": [[-32.0, -16.0], ...]}}
// "grads" is the trainer's distributed-autograd context's gradient map by parameter name, each gradient
// as nested lists in the tensor's shape.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "rpc/value.h"
#include "tensor/tensor.h"

namespace braid::runtime {

// A tensor as nested JSON lists (a 0-dim tensor as a number), values as float64.
nlohmann::ordered_json tensor_to_json(const Tensor& t);

class GradDumpWriter {
 public:
  explicit GradDumpWriter(const std::string& path);  // truncates
  // `grads` is a trainer's {name: gradient} dict.
  void write(int rank, int64_t step, int64_t microbatch, double loss, const rpc::Dict& grads);

 private:
  std::string path_;
  std::ofstream out_;
};

}  // namespace braid::runtime
