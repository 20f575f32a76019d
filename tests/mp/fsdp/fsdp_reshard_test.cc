// Sharded checkpoint files saved on N ranks, resumed on M (parallel/fsdp/reshard.h): model and optimizer
// state resharded so that one more step matches the unsharded reference's, each rank reading only the
// files that hold its rows, and the errors for files of another model or a missing file.
#include <unistd.h>

#include <filesystem>

#include "autograd/engine.h"
#include "autograd/ops/nn_ops.h"
#include "nn/optim/adam.h"
#include "nn/serialize.h"
#include "parallel/fsdp/fully_shard.h"
#include "parallel/fsdp/reshard.h"
#include "tensor/compare.h"
#include "tests/mp/fsdp/fsdp_models.h"
#include "tests/mp/fsdp/fsdp_parity_util.h"
#include "tests/mp/support/default_group.h"
#include "tests/mp/support/mp_test.h"

using namespace braid;
using namespace braid::mp;
namespace fsdp = braid::parallel::fsdp;
namespace coll = braid::collectives;

namespace {

// One step of `model` on this rank's rows [first, first + rows) of a batch every rank draws alike.
void step(nn::Module& model, nn::optim::Optimizer& opt, uint64_t seed, int64_t batch, int64_t first, int64_t rows) {
  Generator gen(seed);
  const Tensor input = rand({batch, 8}, {}, &gen);
  const Tensor target = rand({batch, 8}, {}, &gen);
  autograd::backward(autograd::mse_loss(model(input.narrow(0, first, rows)), target.narrow(0, first, rows)));
  opt.step();
  opt.zero_grad();
}

// A trainer checkpoint's entries: "model.<key>" and "optimizer.<flat key>".
nn::StateDict checkpoint_of(const nn::Module& model, const nn::optim::Optimizer& opt) {
  nn::StateDict out;
  for (auto& [k, t] : model.state_dict()) out.emplace_back("model." + k, t);
  for (auto& [k, t] : opt.state_dict().to_flat()) out.emplace_back("optimizer." + k, t);
  return out;
}

std::string model_entry(const std::string& key) { return "model." + key; }

}  // namespace

TEST_CASE_METHOD(MpFixture, "fsdp: checkpoint files of N ranks reshard to M ranks, optimizer state included",
                 "[fsdp]") {
  DefaultGroupScope world(*this);
  const int ws = size(), r = rank();
  const int64_t batch = ws * 2;
  auto reference = make_narrow_mlp(51);
  auto sharded = make_narrow_mlp(51);
  fsdp::apply_fully_shard(*sharded, coll::default_group(), {}, fsdp::module_type_policy({"Linear"}));
  nn::optim::Adam ref_opt(reference->parameters(), nn::optim::AdamOptions{.lr = 0.01});
  nn::optim::Adam opt(sharded->parameters(), nn::optim::AdamOptions{.lr = 0.01});
  for (uint64_t s = 0; s < 2; ++s) {
    step(*reference, ref_opt, 700 + s, batch, 0, batch);
    step(*sharded, opt, 700 + s, batch, 2 * r, 2);
  }

  const auto dir = shared_temp_dir("fsdp_reshard", r);
  std::vector<std::string> files;
  for (int k = 0; k < ws; ++k) files.push_back((dir / fmt::format("trainer{}.brsd", k)).string());
  nn::save_state_dict(checkpoint_of(*sharded, opt), files[static_cast<size_t>(r)]);
  coll::default_group()->barrier()->wait();

  SECTION("M = N / 2 ranks: one more step matches the reference's, from only the overlapping files") {
    const HybridGroups g = hybrid_groups(r, ws);
    const int me = g.shard->rank();
    auto half = make_narrow_mlp(52);  // other values: everything must come from the files
    fsdp::apply_fully_shard(*half, g.shard, {}, fsdp::module_type_policy({"Linear"}));
    nn::optim::Adam half_opt(half->parameters(), nn::optim::AdamOptions{.lr = 0.01});
    const fsdp::ShardedFiles in(files);
    fsdp::load_sharded_files(*half, in, model_entry, "model.");
    fsdp::load_sharded_optim_files(half_opt, in, "optimizer.");
    if (ws == 4) {
      // Rows of 16, 3 and 8: saved 4/4/4/4, 1/1/1/0 and 2/2/2/2; now 8/8, 2/1 and 4/4: rank 0 of 2 needs
      // saved ranks 0 and 1, rank 1 needs 2 and 3.
      CHECK(in.files_read() == (me == 0 ? std::vector<size_t>{0, 1} : std::vector<size_t>{2, 3}));
    }
    const int64_t per = batch / g.shard_size;
    step(*reference, ref_opt, 800, batch, 0, batch);
    step(*half, half_opt, 800, batch, per * me, per);
    const auto want = reference->parameters();
    const auto got = half->parameters();
    for (size_t i = 0; i < got.size(); ++i) {
      CHECK(allclose(got[i], expected_shard(want[i], me, g.shard_size), kRtol, kAtol));
    }
  }
  SECTION("M = 1, no FSDP: the full model and optimizer") {
    auto plain = make_narrow_mlp(53);
    nn::optim::Adam plain_opt(plain->parameters(), nn::optim::AdamOptions{.lr = 0.01});
    const fsdp::ShardedFiles in(files);
    fsdp::load_sharded_files(*plain, in, model_entry, "model.");
    fsdp::load_sharded_optim_files(plain_opt, in, "optimizer.");
    step(*reference, ref_opt, 801, batch, 0, batch);
    step(*plain, plain_opt, 801, batch, 0, batch);
    const auto want = reference->parameters();
    const auto got = plain->parameters();
    for (size_t i = 0; i < got.size(); ++i) CHECK(allclose(got[i], want[i], kRtol, kAtol));
  }
  SECTION("errors name the file and the entry, and load nothing") {
    auto plain = make_narrow_mlp(54);
    const Tensor before = plain->parameters().front().clone();
    // Another model: wider layers.
    Generator gen(1);
    nn::MLP other(std::vector<int64_t>{8, 32, 3, 8}, true, &gen);
    const fsdp::ShardedFiles in(files);
    CHECK_THROWS_WITH(fsdp::load_sharded_files(other, in, model_entry, "model."),
                      Catch::Contains("model.0.weight") && Catch::Contains("neither shards of it nor copies") &&
                          Catch::Contains(files[0]));
    // Entries under names the files do not have (another model's).
    const auto elsewhere = [](const std::string& k) { return "model.x." + k; };
    CHECK_THROWS_WITH(fsdp::load_sharded_files(*plain, in, elsewhere, "model."),
                      Catch::Contains("no entry 'model.x.") && Catch::Contains(files[0]));
    CHECK(equal(plain->parameters().front(), before));
    // A missing file.
    std::vector<std::string> gone = files;
    gone.back() = (dir / "trainer99.brsd").string();
    CHECK_THROWS_WITH(fsdp::ShardedFiles(gone), Catch::Contains("trainer99.brsd") && Catch::Contains("cannot open"));
  }
  coll::default_group()->barrier()->wait();
  if (r == 0) std::filesystem::remove_all(dir);
}
