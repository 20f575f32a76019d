// `braid bench dist-autograd`'s pieces without a launcher: the iteration statistics, the ratio against
// braid's target, the table and RESULT lines, and the caller's measurements run end to end in a job of
// one worker (the model's owner is the caller itself: every call still goes through RPC and distributed
// autograd's send/recv functions), including a remote model whose gradients are wrong.
#include <catch2/catch.hpp>

#include <map>
#include <mutex>
#include <sstream>

#include "autograd/ops/elementwise.h"
#include "base/config.h"
#include "bench/dist_autograd/dist_autograd_bench.h"
#include "dist_autograd/context.h"
#include "nn/linear.h"
#include "rpc/api.h"
#include "store/hash_store.h"

using namespace braid;
using namespace braid::bench;

namespace {

constexpr const char* kWrongModel = "bench_test.WrongLinear";

// key=value pairs of each "RESULT dist_autograd ..." line, in order.
std::vector<std::map<std::string, std::string>> parse_results(const std::string& text) {
  std::vector<std::map<std::string, std::string>> out;
  std::istringstream lines(text);
  std::string line;
  const std::string prefix = "RESULT dist_autograd ";
  while (std::getline(lines, line)) {
    if (line.rfind(prefix, 0) != 0) continue;
    std::istringstream words(line.substr(prefix.size()));
    std::map<std::string, std::string> kv;
    std::string word;
    while (words >> word) {
      const auto eq = word.find('=');
      if (eq != std::string::npos) kv[word.substr(0, eq)] = word.substr(eq + 1);
    }
    out.push_back(std::move(kv));
  }
  return out;
}

DistAutogradBenchRow row(std::string mode, double p50_ms, double mean_ms) {
  DistAutogradBenchRow r;
  r.mode = std::move(mode);
  r.iters = 10;
  r.p50_ms = p50_ms;
  r.mean_ms = mean_ms;
  r.min_ms = p50_ms / 2;
  r.max_ms = p50_ms * 2;
  r.forward_ms = p50_ms / 3;
  r.backward_ms = p50_ms / 2;
  return r;
}

// The bench's model class, and one that computes 2 * linear(x): its gradients are twice the local ones.
void register_classes() {
  static std::once_flag once;
  std::call_once(once, [] {
    auto& registry = rpc::global_registry();
    register_dist_autograd_bench_classes(registry);
    register_dist_autograd_bench_classes(registry);  // twice is harmless
    registry.add_class<nn::Linear>(kWrongModel)
        .constructor([](const rpc::Args& a) {
          Generator gen(static_cast<uint64_t>(a.at(2).as_int()));
          return std::make_shared<nn::Linear>(a.at(0).as_int(), a.at(1).as_int(), true, &gen);
        })
        .method("forward", [](nn::Linear& m, const rpc::Args& a) -> rpc::Value {
          return autograd::mul(m.forward(a.at(0).as_tensor()), 2.0);
        })
        .method("gradients", [](nn::Linear& m, const rpc::Args& a) -> rpc::Value {
          const auto grads = dist_autograd::get_gradients(a.at(0).as_int());
          return rpc::list({rpc::Value(grads.at(m.weight())), rpc::Value(grads.at(m.bias()))});
        });
  });
}

// One worker named worker0 over a private in-process store: the bench's calls go to itself.
struct OneWorker {
  explicit OneWorker(const std::string& transport = "tcp") {
    register_classes();
    rpc::RpcBackendOptions o;
    o.transport = transport;
    o.store = std::make_shared<store::HashStore>();
    o.rpc_timeout = rpc::Millis(20'000);
    rpc::init_rpc("worker0", 0, 1, o);
  }
  ~OneWorker() { rpc::shutdown(true); }
  OneWorker(const OneWorker&) = delete;
  OneWorker& operator=(const OneWorker&) = delete;
};

std::vector<std::string> transports() {
  std::vector<std::string> all = {"tcp"};
  if (BRAID_HAVE_UCX) all.push_back("ucx");
  return all;
}

DistAutogradBenchOptions tiny_options() {
  DistAutogradBenchOptions o;
  o.iters = 4;
  o.warmup = 1;
  o.batch = 3;
  o.features = 16;
  o.timeout_s = 20;
  o.timeline = 3;
  return o;
}

}  // namespace

TEST_CASE("dist-autograd bench: iteration summary is mean, nearest-rank p50, min, max", "[bench][bench_da]") {
  const DistAutogradBenchRow r = summarize_iterations("local", {4, 1, 3, 2});  // unsorted on purpose
  CHECK(r.mode == "local");
  CHECK(r.iters == 4);
  CHECK(r.min_ms == 1);
  CHECK(r.p50_ms == 2);  // nearest rank: the 2nd of 4
  CHECK(r.max_ms == 4);
  CHECK(r.mean_ms == Approx(2.5));
  CHECK(summarize_iterations("distributed", {7}).p50_ms == 7);
  CHECK_THROWS_AS(summarize_iterations("local", {}), InvalidArgument);
}

TEST_CASE("dist-autograd bench: the ratio, the target, the table and the RESULT lines", "[bench][bench_da]") {
  DistAutogradBenchReport report;
  report.transport = "tcp";
  report.batch = 64;
  report.features = 1024;
  report.threads = 1;
  report.rpc_threads = 4;
  CHECK_FALSE(report.ratio().has_value());
  CHECK_THAT(format_dist_autograd_bench_footer(report), Catch::Contains("a row is missing"));

  report.rows = {row("local", 4.0, 4.2), row("distributed", 4.4, 5.0)};
  report.rows[1].gradients_ms = 0.01;
  report.rows[1].release_ms = 0.2;
  REQUIRE(report.ratio().has_value());
  CHECK(*report.ratio() == Approx(1.1));
  DistAutogradBenchOptions o;
  const std::string table = format_dist_autograd_bench_table(report, o);
  CHECK_THAT(table, Catch::Contains("Linear(1024, 1024)") && Catch::Contains("4 tensors of 256 KiB"));
  CHECK_THAT(table, Catch::Contains("local") && Catch::Contains("distributed"));
  CHECK_THAT(table, Catch::Contains("distributed / local (p50): 1.100x") && Catch::Contains("min 1.100x") &&
                        Catch::Contains("target <= 1.15x: met"));
  auto results = parse_results(format_dist_autograd_bench_results(report));
  REQUIRE(results.size() == 2);
  CHECK(results[0].at("mode") == "local");
  CHECK(results[0].at("p50_ms") == "4.0000");
  CHECK(results[0].count("release_ms") == 0);
  CHECK(results[0].count("ratio") == 0);
  CHECK(results[1].at("mode") == "distributed");
  CHECK(results[1].at("transport") == "tcp");
  CHECK(results[1].at("features") == "1024");
  CHECK(results[1].at("release_ms") == "0.2000");
  CHECK(results[1].at("ratio") == "1.1000");
  CHECK(results[1].at("ratio_min") == "1.1000");  // min is half the p50 in both rows
  CHECK(*report.ratio_min() == Approx(1.1));
  CHECK(results[1].at("target") == "ratio<=1.15");
  CHECK(results[1].at("met") == "1");

  report.rows[1].p50_ms = 4.8;  // 1.2x
  CHECK_THAT(format_dist_autograd_bench_footer(report), Catch::Contains("1.200x") && Catch::Contains("MISSED"));
  results = parse_results(format_dist_autograd_bench_results(report));
  CHECK(results[1].at("met") == "0");
}

TEST_CASE("dist-autograd bench: the caller's measurements run end to end", "[bench][bench_da]") {
  const std::string transport = GENERATE(from_range(transports()));
  INFO("transport " << transport);
  OneWorker job(transport);
  const DistAutogradBenchOptions o = tiny_options();
  std::vector<std::string> seen;
  const DistAutogradBenchReport report = run_dist_autograd_bench_caller(
      rpc::get_worker_info("worker0"), o,
      [&](const DistAutogradBenchReport& r, const DistAutogradBenchRow& row) {
        CHECK(r.check.ok);  // checked before the first row
        seen.push_back(row.mode);
      });
  CHECK(seen == std::vector<std::string>{"local", "distributed"});
  CHECK(report.check.ok);
  CHECK(report.check.max_abs_diff < 1e-4);
  CHECK(report.transport == transport);
  CHECK(report.batch == 3);
  CHECK(report.features == 16);
  REQUIRE(report.rows.size() == 2);
  for (const auto& r : report.rows) {
    INFO(r.mode);
    CHECK(r.iters == o.iters);
    CHECK(0 < r.min_ms);
    CHECK(r.min_ms <= r.p50_ms);
    CHECK(r.p50_ms <= r.max_ms);
    CHECK(r.min_ms <= r.mean_ms);
    CHECK(r.mean_ms <= r.max_ms);
    CHECK(r.forward_ms > 0);
    CHECK(r.backward_ms > 0);
    // The phases are parts of the iteration.
    CHECK(r.forward_ms + r.backward_ms + r.gradients_ms + r.release_ms <= r.mean_ms * 1.0001);
  }
  CHECK(report.rows[0].gradients_ms == 0);
  CHECK(report.rows[0].release_ms == 0);
  CHECK(report.rows[1].gradients_ms > 0);
  CHECK(report.rows[1].release_ms > 0);
  CHECK(report.ratio().has_value());
  CHECK(parse_results(format_dist_autograd_bench_results(report)).size() == 2);

  // The traced iterations: every hook ran (or the caller would have thrown), the segments are in order in
  // time and add up to an iteration.
  REQUIRE(report.timeline.has_value());
  const DistAutogradTimeline& t = *report.timeline;
  CHECK(t.iters == o.timeline);
  REQUIRE(t.segments.size() == 10);
  for (const auto& seg : t.segments) {
    INFO(seg.key);
    CHECK(seg.mean_ms >= 0);
    CHECK(seg.p50_ms >= 0);
  }
  CHECK(t.at("owner_forward").mean_ms > 0);
  CHECK(t.at("owner_backward").mean_ms > 0);
  REQUIRE(t.aside.size() == 3);
  CHECK(t.at("owner_linear_backward").mean_ms > 0);
  CHECK(t.at("owner_accumulate").mean_ms >= 0);
  // The owner's backward in detail spans its part of the path: d out -> d x.
  CHECK(t.at("owner_linear_backward").mean_ms + t.at("owner_accumulate").mean_ms +
            t.at("owner_params_to_dx").mean_ms ==
        Approx(t.at("owner_backward").mean_ms).margin(1e-9));
  CHECK_THROWS_AS(t.at("teleport"), InvalidArgument);
  // The segments cover the traced iteration: more than its forward and backward on the owner.
  CHECK(t.total_ms() > t.at("owner_forward").mean_ms + t.at("owner_backward").mean_ms);
  CHECK(t.total_ms() < 20'000);
  const std::string timeline = format_dist_autograd_timeline(report);
  CHECK_THAT(timeline, Catch::Contains("where the time goes") && Catch::Contains("d x back") &&
                           Catch::Contains("RESULT dist_autograd_timeline transport=" + transport));
  // Every context was released.
  CHECK(dist_autograd::num_contexts() == 0);
}

TEST_CASE("dist-autograd bench: no timeline when none is asked for", "[bench][bench_da]") {
  OneWorker job;
  DistAutogradBenchOptions o = tiny_options();
  o.timeline = 0;
  const DistAutogradBenchReport report = run_dist_autograd_bench_caller(rpc::get_worker_info("worker0"), o);
  CHECK_FALSE(report.timeline.has_value());
  CHECK(format_dist_autograd_timeline(report).empty());
  CHECK(report.rows.size() == 2);
}

TEST_CASE("dist-autograd bench: a remote model with wrong gradients fails the check before any timing",
          "[bench][bench_da]") {
  OneWorker job;
  DistAutogradBenchOptions o = tiny_options();
  o.model_class = kWrongModel;
  int rows = 0;
  CHECK_THROWS_WITH(run_dist_autograd_bench_caller(rpc::get_worker_info("worker0"), o,
                                                   [&](const DistAutogradBenchReport&, const DistAutogradBenchRow&) {
                                                     ++rows;
                                                   }),
                    Catch::Contains("differ from the local ones") && Catch::Contains("the gradient of x") &&
                        Catch::Contains("worker0"));
  CHECK(rows == 0);
  CHECK(dist_autograd::num_contexts() == 0);
}

TEST_CASE("dist-autograd bench: bad options are rejected before any call", "[bench][bench_da]") {
  DistAutogradBenchOptions o = tiny_options();
  o.batch = 0;
  // No RPC agent runs: the options are checked first.
  CHECK_THROWS_AS(run_dist_autograd_bench_caller(rpc::WorkerInfo{}, o), InvalidArgument);
  o = tiny_options();
  o.transport = "carrier-pigeon";
  CHECK_THROWS_AS(run_dist_autograd_bench_caller(rpc::WorkerInfo{}, o), InvalidArgument);
  o = tiny_options();
  o.warmup = -1;
  CHECK_THROWS_AS(run_dist_autograd_bench_caller(rpc::WorkerInfo{}, o), InvalidArgument);
  o = tiny_options();
  o.timeline = -1;
  CHECK_THROWS_AS(run_dist_autograd_bench_caller(rpc::WorkerInfo{}, o), InvalidArgument);
}
