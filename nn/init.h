// Parameter initialisers, as torch.nn.init: each fills a tensor in place (under NoGradGuard, so a
// parameter stays a leaf), bumps its version and returns it.
//
// Random fills draw from `gen`, or from braid::default_generator() when null, one value per element in
// row-major order: the same seed and the same sequence of constructions give bit-identical weights
// (though not PyTorch's values: the generators differ).
#pragma once

#include <cstdint>
#include <utility>

#include "tensor/random.h"
#include "tensor/tensor.h"

namespace braid::nn::init {

enum class FanMode { FanIn, FanOut };
enum class Nonlinearity { Linear, Sigmoid, Tanh, ReLU, LeakyReLU };

// (fan_in, fan_out) of a weight of at least 2 dims: size(1) and size(0), times the receptive field (the
// product of the dims after the second).
std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& t);
// The recommended gain of torch.nn.init.calculate_gain; `param` is leaky_relu's negative slope.
double calculate_gain(Nonlinearity nonlinearity, double param = 0.01);

// U(a, b).
const Tensor& uniform_(const Tensor& t, double a = 0.0, double b = 1.0, Generator* gen = nullptr);
// N(mean, std^2).
const Tensor& normal_(const Tensor& t, double mean = 0.0, double std = 1.0, Generator* gen = nullptr);
const Tensor& constant_(const Tensor& t, double value);
const Tensor& zeros_(const Tensor& t);
const Tensor& ones_(const Tensor& t);
// U(-bound, bound) with bound = gain * sqrt(3 / fan), gain = calculate_gain(nonlinearity, a). With
// a = sqrt(5) and FanIn this is nn.Linear's default: bound = 1 / sqrt(in_features).
const Tensor& kaiming_uniform_(const Tensor& t, double a = 0.0, FanMode mode = FanMode::FanIn,
                               Nonlinearity nonlinearity = Nonlinearity::LeakyReLU, Generator* gen = nullptr);

}  // namespace braid::nn::init
