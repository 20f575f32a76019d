// RemoteModule across processes: every rank makes a module on the next rank's worker (so with 2 ranks
// each hosts the other's, with 6 a ring), runs it and reads its parameters back; values by hand.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "base/error.h"
#include "dist_autograd/hosted_module.h"
#include "dist_autograd/remote_module.h"
#include "rpc/api.h"
#include "tensor/compare.h"
#include "tensor/factory.h"
#include "tensor/ops/elementwise.h"
#include "tests/mp/dist_autograd/remote_module_mp.h"
#include "tests/mp/rpc/rpc_mp.h"

namespace braid::mp {

using dist_autograd::RemoteModule;
using rpc::Value;

namespace {

int next_rank(const MpFixture& f) { return (f.rank() + 1) % f.size(); }

// W + r and b + r for rank r, so that every rank's module differs: y = known_y + r * (rowsum(x) + 1).
Tensor w_of(int r) { return add(known_w(), static_cast<double>(r)); }
Tensor b_of(int r) { return add(known_b(), static_cast<double>(r)); }
Tensor y_of(int r) {
  const float k = static_cast<float>(r);
  return add(known_y(), mat({k, k, k, 3.5f * k, 3.5f * k, 3.5f * k}, {2, 3}));
}

}  // namespace

TEST_CASE_METHOD(MpFixture, "RemoteModule: forward through a Linear with known weights on another worker",
                 "[remote_module]") {
  register_remote_module_test_classes();
  RpcJob job(*this);
  const int owner = next_rank(*this);
  const std::string forms[] = {worker_name(owner) + "/cpu", worker_name(owner), "rank:" + std::to_string(owner) + "/cpu"};
  for (const std::string& dev : forms) {
    INFO("remote_device " << dev);
    RemoteModule layer(dev, "rm.FixedLinear", {Value(w_of(rank())), Value(b_of(rank()))});
    CHECK(layer.owner().name == worker_name(owner));
    CHECK(layer.owner().id == owner);
    CHECK(layer.module_rref().owner().id == owner);
    CHECK(equal(layer(known_x()), y_of(rank())));
  }
  // The built-in class with weights loaded on the owner.
  RemoteModule builtin(worker_name(owner), "nn.Linear", {Value(int64_t{2}), Value(int64_t{3})});
  rpc::rpc_sync(worker_name(owner), "rm.load_params",
                {Value(builtin.module_rref()), rpc::list({Value(known_w()), Value(known_b())})});
  CHECK(equal(builtin(known_x()), known_y()));
  job.shutdown(true);
}

TEST_CASE_METHOD(MpFixture, "RemoteModule: remote_parameters are RRefs on the owner whose to_here are the parameters",
                 "[remote_module]") {
  register_remote_module_test_classes();
  RpcJob job(*this);
  const int owner = next_rank(*this);
  RemoteModule layer(worker_name(owner) + "/cpu", "rm.FixedLinear", {Value(w_of(rank())), Value(b_of(rank()))});
  const std::vector<rpc::RRef> params = layer.remote_parameters();
  REQUIRE(params.size() == 2);
  for (const rpc::RRef& p : params) {
    CHECK(p.owner().id == owner);
    CHECK(p.is_owner() == (owner == rank()));
  }
  CHECK(equal(params[0].to_here().as_tensor(), w_of(rank())));
  CHECK(equal(params[1].to_here().as_tensor(), b_of(rank())));
  CHECK(layer.remote_parameters(false).size() == 2);

  // to_here() of the module: its state dict, the same values.
  const nn::StateDict state = dist_autograd::state_dict_of(layer.module_rref().to_here());
  REQUIRE(state.size() == 2);
  CHECK(state[0].first == "weight");
  CHECK(equal(state[0].second, w_of(rank())));
  CHECK(state[1].first == "bias");
  CHECK(equal(state[1].second, b_of(rank())));

  // A change on the owner is seen through the same RRefs.
  rpc::rpc_sync(worker_name(owner), "rm.load_params",
                {Value(layer.module_rref()), rpc::list({Value(known_w()), Value(zeros({3}))})});
  CHECK(equal(params[0].to_here().as_tensor(), known_w()));
  CHECK(equal(params[1].to_here().as_tensor(), zeros({3})));
  job.shutdown(true);
}

TEST_CASE_METHOD(MpFixture, "RemoteModule: several forward_async calls in flight each get their own result",
                 "[remote_module]") {
  register_remote_module_test_classes();
  RpcJob job(*this);
  RemoteModule layer(worker_name(next_rank(*this)), "rm.FixedLinear", {Value(known_w()), Value(known_b())});
  std::vector<Future<Tensor>> pending;
  for (int k = 0; k < 8; ++k) pending.push_back(layer.forward_async(mul(known_x(), static_cast<double>(k))));
  for (int k = 0; k < 8; ++k) {
    // k x W^T + b = k (y - b) + b.
    const Tensor expected = add(mul(sub(known_y(), known_b()), static_cast<double>(k)), known_b());
    CHECK(equal(pending[static_cast<size_t>(k)].value(std::chrono::seconds(30)), expected));
  }
  job.shutdown(true);
}

TEST_CASE_METHOD(MpFixture, "RemoteModule: an EmbeddingBag on another worker sums its bags", "[remote_module]") {
  register_remote_module_test_classes();
  RpcJob job(*this);
  rpc::Args args{Value(int64_t{4}), Value(int64_t{2})};
  args.kwargs.set("mode", Value("sum"));
  args.kwargs.set("_weight", Value(mat({0, 1, 10, 11, 20, 21, 30, 31}, {4, 2})));
  RemoteModule bag(worker_name(next_rank(*this)) + "/cpu", "nn.EmbeddingBag", args);
  const nn::TensorList out = bag.forward_many({from_vector(std::vector<int64_t>{0, 2, 3, 1}, {4}),
                                           from_vector(std::vector<int64_t>{0, 1}, {2})});
  REQUIRE(out.size() == 1);
  CHECK(equal(out[0], mat({0, 1, 60, 63}, {2, 2})));
  job.shutdown(true);
}

TEST_CASE_METHOD(MpFixture, "RemoteModule: failures on the owner come back naming it", "[remote_module]") {
  register_remote_module_test_classes();
  RpcJob job(*this);
  const std::string owner = worker_name(next_rank(*this));
  try {
    RemoteModule missing(owner, "rm.NoSuchModule", {});
    FAIL("an unknown module class was created");
  } catch (const RemoteError& e) {
    CHECK(e.worker() == owner);
    CHECK_THAT(e.remote_message(), Catch::Contains("creating the module failed: unknown module class 'rm.NoSuchModule'"));
  }
  RemoteModule layer(owner, "rm.FixedLinear", {Value(known_w()), Value(known_b())});
  try {
    layer(ones({2, 5}));  // the module takes 2 features
    FAIL("a forward with the wrong width succeeded");
  } catch (const RemoteError& e) {
    CHECK(e.worker() == owner);
  }
  CHECK_THROWS_WITH(RemoteModule("rank:" + std::to_string(size()) + "/cpu", "nn.Linear", {}),
                    Catch::Contains("no worker has rank " + std::to_string(size())));
  job.shutdown(true);
}

}  // namespace braid::mp
