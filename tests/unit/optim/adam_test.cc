// Adam and AdamW against hand-computed updates (PyTorch 1.13's rules, see nn/optim/adam.h).
//
// The expected numbers follow the formulas step by step in float64: m and v are the moment estimates,
// bc1 = 1 - beta1^t, bc2 = 1 - beta2^t, denom = sqrt(v) / sqrt(bc2) + eps, p -= (lr / bc1) * m / denom.
#include "nn/optim/adam.h"

#include "optim_test_util.h"

using namespace braid;
using namespace braid::nn::optim;
using braid::nn::TensorList;
using namespace braid::nn::optim::testing;

TEST_CASE("Adam: three steps with bias correction, eps outside the square root", "[optim][adam]") {
  Tensor p = param({1.0});
  Adam opt({p}, AdamOptions{.lr = 0.1});
  // t=1, g=0.5: m = 0.1*0.5 = 0.05; v = 0.001*0.25 = 0.00025; bc1 = 0.1, bc2 = 0.001
  //   denom = sqrt(0.00025)/sqrt(0.001) + 1e-8 = 0.5 + 1e-8 = 0.50000001
  //   p = 1 - (0.1/0.1) * 0.05/0.50000001 = 1 - 0.099999998 = 0.900000002
  give_grad(p, {0.5});
  opt.step();
  require_close(p, {0.900000002});
  require_close(opt.state(0).at("exp_avg"), {0.05});
  require_close(opt.state(0).at("exp_avg_sq"), {0.00025});
  CHECK(opt.state(0).at("step").item<double>() == 1.0);
  CHECK(opt.state(0).at("step").dtype() == DType::Float32);  // as PyTorch 1.13 keeps it
  CHECK(opt.state(0).count("max_exp_avg_sq") == 0);

  // t=2, g=-0.25: m = 0.9*0.05 + 0.1*(-0.25) = 0.02; v = 0.999*0.00025 + 0.001*0.0625 = 0.00031225
  //   bc1 = 1 - 0.81 = 0.19; bc2 = 1 - 0.998001 = 0.001999
  //   denom = sqrt(0.00031225)/sqrt(0.001999) + 1e-8 = 0.395225390701667
  //   p = 0.900000002 - (0.1/0.19) * 0.02/0.395225390701667 = 0.8733662987078463
  give_grad(p, {-0.25});
  opt.step();
  require_close(p, {0.8733662987078463});
  require_close(opt.state(0).at("exp_avg"), {0.02});
  require_close(opt.state(0).at("exp_avg_sq"), {0.00031225});

  // t=3, g=1: m = 0.9*0.02 + 0.1 = 0.118; v = 0.999*0.00031225 + 0.001 = 0.00131193775
  //   bc1 = 0.271; bc2 = 0.002997001; denom = 0.6616269347878361
  //   p = 0.8733662987078463 - (0.1/0.271) * 0.118/0.6616269347878361 = 0.8075551396770898
  give_grad(p, {1.0});
  opt.step();
  require_close(p, {0.8075551396770898});
  CHECK(opt.state(0).at("step").item<double>() == 3.0);
}

TEST_CASE("Adam: weight decay is an L2 term in the gradient", "[optim][adam]") {
  Tensor p = param({1.0});
  Adam opt({p}, AdamOptions{.lr = 0.1, .weight_decay = 0.1});
  // t=1: g = 0.5 + 0.1*1 = 0.6; m = 0.06; v = 0.00036; denom = 0.6 + 1e-8
  //   p = 1 - 1 * 0.06/0.60000001 = 0.9000000016666666
  give_grad(p, {0.5});
  opt.step();
  require_close(p, {0.9000000016666666});
  // t=2: g = -0.25 + 0.1*0.9000000016666666 = -0.15999999983333334
  //   m = 0.054 - 0.015999999983 = 0.03800000001666665; v = 0.00038523999994666703
  //   denom = 0.43899472312581006; p = 0.9000000016666666 - (0.1/0.19)*m/denom = 0.8544413674617625
  give_grad(p, {-0.25});
  opt.step();
  require_close(p, {0.8544413674617625});
}

TEST_CASE("AdamW: decoupled weight decay p *= 1 - lr*wd before the Adam step", "[optim][adam]") {
  Tensor p = param({1.0});
  AdamW opt({p}, AdamWOptions{.lr = 0.1, .weight_decay = 0.1});
  // t=1: p = 1 * (1 - 0.01) = 0.99; then the plain Adam step of -0.099999998 (g = 0.5): 0.890000002
  give_grad(p, {0.5});
  opt.step();
  require_close(p, {0.890000002});
  // t=2: p = 0.890000002 * 0.99 = 0.88110000198; Adam step as in the plain test (g = -0.25):
  //   - (0.1/0.19) * 0.02/0.395225390701667 = -0.0266337032921537 -> 0.8544662986878463
  give_grad(p, {-0.25});
  opt.step();
  require_close(p, {0.8544662986878463});
  // The moments never see the decay: same as plain Adam's.
  require_close(opt.state(0).at("exp_avg"), {0.02});
}

TEST_CASE("AdamW: the default weight decay is 1e-2, Adam's is 0", "[optim][adam]") {
  Tensor p = param({1.0});
  AdamW w({p});
  Adam a({p});
  CHECK(w.options().weight_decay == 1e-2);
  CHECK(a.options().weight_decay == 0.0);
  CHECK(w.options().lr == 1e-3);
  CHECK(w.options().beta1 == 0.9);
  CHECK(w.options().beta2 == 0.999);
  CHECK(w.options().eps == 1e-8);
  CHECK(w.name() == "AdamW");
}

TEST_CASE("Adam: amsgrad divides by the running maximum of v", "[optim][adam]") {
  // beta2 = 0.5 so that v falls after a large first gradient and the maximum matters.
  Tensor p = param({1.0});
  Tensor q = param({1.0});
  Adam ams({p}, AdamOptions{.lr = 0.1, .beta2 = 0.5, .amsgrad = true});
  Adam plain({q}, AdamOptions{.lr = 0.1, .beta2 = 0.5});
  // t=1, g=1: m = 0.1; v = 0.5; vmax = 0.5; bc2 = 0.5; denom = sqrt(0.5)/sqrt(0.5) + 1e-8 = 1.00000001
  //   p = 1 - (0.1/0.1) * 0.1/1.00000001 = 0.900000001 (both)
  give_grad(p, {1.0});
  give_grad(q, {1.0});
  ams.step();
  plain.step();
  require_close(p, {0.900000001});
  require_close(q, {0.900000001});
  // t=2, g=0.1: m = 0.09 + 0.01 = 0.1; v = 0.25 + 0.005 = 0.255; vmax = 0.5; bc1 = 0.19; bc2 = 0.75
  //   amsgrad: denom = sqrt(0.5)/sqrt(0.75) + 1e-8 = 0.8164965909277262
  //            p = 0.900000001 - (0.1/0.19) * 0.1/0.8164965909277262 = 0.8355397454004426
  //   plain:   denom = sqrt(0.255)/sqrt(0.75) + 1e-8 = 0.5830951994845301 -> 0.8097375893150882
  give_grad(p, {0.1});
  give_grad(q, {0.1});
  ams.step();
  plain.step();
  require_close(p, {0.8355397454004426});
  require_close(q, {0.8097375893150882});
  require_close(ams.state(0).at("max_exp_avg_sq"), {0.5});
  // t=3, g=0.1: v = 0.1275 + 0.005 = 0.1325; vmax stays 0.5; bc1 = 0.271; bc2 = 0.875
  //   denom = sqrt(0.5)/sqrt(0.875) + 1e-8 = 0.7559289560184546 -> p = 0.786725146211059
  ams.step();
  require_close(p, {0.786725146211059});
  require_close(ams.state(0).at("exp_avg_sq"), {0.1325});
}

TEST_CASE("Adam: maximize ascends", "[optim][adam]") {
  Tensor p = param({1.0, 1.0});
  Adam opt({p}, AdamOptions{.lr = 0.1, .maximize = true});
  give_grad(p, {0.5, -2.0});
  opt.step();
  // The first step moves by lr * sign(-g) * (|g| / (|g| + eps)) ~ 0.1, upwards along g.
  require_close(p, {1.099999998, 0.9000000005});
}

TEST_CASE("Adam: invalid options", "[optim][adam][errors]") {
  Tensor p = param({1.0});
  REQUIRE_THROWS_WITH(Adam({p}, AdamOptions{.lr = -1}), Catch::Contains("Adam: Invalid learning rate: -1"));
  REQUIRE_THROWS_WITH(Adam({p}, AdamOptions{.beta1 = 1.0}), Catch::Contains("Invalid beta parameter at index 0"));
  REQUIRE_THROWS_WITH(Adam({p}, AdamOptions{.beta2 = -0.1}), Catch::Contains("Invalid beta parameter at index 1"));
  REQUIRE_THROWS_WITH(Adam({p}, AdamOptions{.eps = -1e-8}), Catch::Contains("Invalid epsilon value"));
  REQUIRE_THROWS_WITH(AdamW({p}, AdamWOptions{.weight_decay = -1}),
                      Catch::Contains("AdamW: Invalid weight_decay value"));
}
