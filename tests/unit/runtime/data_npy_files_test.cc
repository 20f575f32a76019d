// NumPy data in jobs (data.kind: npy): the job keys and their errors, the committed digits .npy files against
// their CSV, and a 2 GiB sparse file iterated with a bounded resident set (its numbers go to the test log).
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <numeric>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "base/error.h"
#include "runtime/data/dataset.h"
#include "runtime/data/npy_dataset.h"
#include "runtime/data/npy_file.h"
#include "runtime/job/job_spec.h"
#include "tensor/factory.h"
#include "tests/support/temp_dir.h"
#include "tests/support/error_of.h"
#include "tests/unit/runtime/npy_test_util.h"

// ASan and TSan keep shadow memory for every page the program touches (gcc defines __SANITIZE_*__, clang
// answers __has_feature).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitizerShadow = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSanitizerShadow = true;
#else
constexpr bool kSanitizerShadow = false;
#endif
#else
constexpr bool kSanitizerShadow = false;
#endif

namespace braid::runtime {
namespace {

using Catch::Matchers::Contains;
using data::NpyDataset;
using data::NpyFile;
using testing::TempDir;
using testing::error_of;
using namespace npy_test;

// --- Job files.

const char* kMinimal = "roles: {trainers: 2}\nmodel: {kind: mlp}\n";

std::string job_error(const std::string& yaml, const std::string& base) {
  return error_of([&] { parse_job_text(std::string(kMinimal) + yaml, "job.yaml", base); });
}

TEST_CASE("npy job keys: files relative to the job, both test files or neither, kind-specific", "[runtime][job][npy]") {
  TempDir dir("npy_job");
  std::filesystem::create_directories(dir.path() / "data");
  for (const char* name : {"data/x.npy", "data/y.npy", "data/tx.npy", "data/ty.npy"}) {
    write_npy(dir, name, "<i8", "(1,)", raw<int64_t>({0}));
  }
  const std::string base = dir.path().string();
  const JobSpec job = parse_job_text(std::string(kMinimal) +
                                         "data: {kind: npy, inputs: data/x.npy, targets: data/y.npy, test_inputs: "
                                         "data/tx.npy, test_targets: data/ty.npy, feature_scale: 0.5, drop_last: true, "
                                         "partition: contiguous, shuffle: false}\n",
                                     "job.yaml", base);
  CHECK(job.data.kind == DataKind::Npy);
  CHECK(job.data.inputs == dir.file("data/x.npy"));
  CHECK(job.data.targets == dir.file("data/y.npy"));
  CHECK(job.data.test_inputs == dir.file("data/tx.npy"));
  CHECK(job.data.test_targets == dir.file("data/ty.npy"));
  CHECK(job.data.feature_scale == 0.5);
  CHECK(job.data.drop_last);
  CHECK(job.data.partition == Partition::Contiguous);
  CHECK_FALSE(job.data.shuffle);
  CHECK(to_string(DataKind::Npy) == "npy");

  // to_json (braid check --print) has every key, and an override re-parses it.
  const nlohmann::json j = to_json(job);
  CHECK(j["data"]["kind"] == "npy");
  CHECK(j["data"]["inputs"] == dir.file("data/x.npy"));
  CHECK(j["data"]["test_targets"] == dir.file("data/ty.npy"));
  JobSpec changed = job;
  apply_override(changed, "data.test_inputs=" + dir.file("data/x.npy"));
  CHECK(changed.data.test_inputs == dir.file("data/x.npy"));
  CHECK(to_json(changed)["data"]["inputs"] == j["data"]["inputs"]);
  // The other kinds print the npy keys empty, and take them back.
  const JobSpec synthetic = parse_job_text(kMinimal, "job.yaml", base);
  CHECK(to_json(synthetic)["data"]["inputs"] == "");
  JobSpec round = synthetic;
  apply_override(round, "data.seed=3");
  CHECK(round.data.seed == 3);

  CHECK_THAT(job_error("data: {kind: npy, targets: data/y.npy}\n", base),
             Contains("job.yaml:3: data.inputs: required for npy data"));
  CHECK_THAT(job_error("data: {kind: npy, inputs: data/x.npy}\n", base), Contains("data.targets: required for npy data"));
  CHECK_THAT(job_error("data: {kind: npy, inputs: data/x.npy, targets: data/y.npy, test_inputs: data/tx.npy}\n", base),
             Contains("data.test_targets: required with data.test_inputs"));
  CHECK_THAT(job_error("data: {kind: npy, inputs: data/x.npy, targets: data/y.npy, test_targets: data/ty.npy}\n", base),
             Contains("data.test_inputs: required with data.test_targets"));
  CHECK_THAT(job_error("data: {kind: npy, inputs: data/nope.npy, targets: data/y.npy}\n", base),
             Contains("data.inputs: no such file: " + dir.file("data/nope.npy")));
  CHECK_THAT(job_error("data: {kind: csv, path: data/x.npy, inputs: data/x.npy}\n", base),
             Contains("data.inputs: only for npy data (data.kind is 'csv')"));
  CHECK_THAT(job_error("data: {test_targets: data/y.npy}\n", base),
             Contains("data.test_targets: only for npy data (data.kind is 'synthetic')"));
  CHECK_THAT(job_error("data: {kind: npy, inputs: data/x.npy, targets: data/y.npy, path: data/x.npy}\n", base),
             Contains("data.path: only for csv and binary data (data.kind is 'npy')"));
  CHECK_THAT(job_error("data: {kind: npy, inputs: data/x.npy, targets: data/y.npy, feature_columns: [0]}\n", base),
             Contains("data.feature_columns: not for npy data"));
  CHECK_THAT(job_error("data: {kind: npy, input: data/x.npy, targets: data/y.npy}\n", base),
             Contains("data.input: unknown key; did you mean 'inputs'?"));
  JobSpec bad = job;
  CHECK_THAT(error_of([&] { apply_override(bad, "data.kind=csv"); }),
             Contains("data.inputs: only for npy data (data.kind is 'csv')"));
}

// --- The committed example data.

const std::filesystem::path kExampleData =
    std::filesystem::path(__FILE__).parent_path() / "../../../examples/data";

TEST_CASE("npy: the committed digits .npy files hold exactly the CSV files' data", "[runtime][data][npy]") {
  for (const std::string split : {"train", "test"}) {
    CAPTURE(split);
    DataSpec csv;
    csv.kind = DataKind::Csv;
    csv.path = (kExampleData / ("digits_" + split + ".csv")).string();
    csv.header = true;
    csv.feature_scale = 0.0625;
    DataSpec npy;
    npy.kind = DataKind::Npy;
    npy.inputs = (kExampleData / ("digits_" + split + "_inputs.npy")).string();
    npy.targets = (kExampleData / ("digits_" + split + "_targets.npy")).string();
    npy.feature_scale = 0.0625;
    const auto a = make_dataset(csv, Split::Train);
    const auto b = make_dataset(npy, Split::Train);
    CHECK(NpyFile(npy.inputs).descr() == "|u1");
    CHECK(NpyFile(npy.targets).descr() == "<i8");
    REQUIRE(b->size() == a->size());
    CHECK(b->size() == (split == "train" ? 1442 : 355));
    CHECK(b->num_features() == 64);
    CHECK(b->num_classes() == 10);
    const Batch x = a->gather(all_rows(*a));
    const Batch y = b->gather(all_rows(*b));
    CHECK(to_vector<float>(x.inputs[0]) == to_vector<float>(y.inputs[0]));  // bit for bit
    CHECK(to_vector<int64_t>(x.target) == to_vector<int64_t>(y.target));
  }
}

// --- Resident memory over a file larger than the budget.

// A field of /proc/self/status in KiB ("VmRSS", "VmHWM"); -1 where there is none.
int64_t status_kib(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) == 0) return std::stoll(line.substr(key.size() + 1));
  }
  return -1;
}

TEST_CASE("npy dataset: iterating a 2 GiB file keeps the resident set bounded", "[runtime][data][npy][memory]") {
  // A 2 GiB float32 file (512 Ki rows of 1024 features) that is all hole: the header is written and the
  // file extended with ftruncate, so nothing goes to disk. Reading it faults in zero pages from the page
  // cache, exactly as a real file's would come (without the I/O).
  TempDir dir("npy_memory");
  struct statfs fs {};
  if (::statfs(dir.path().c_str(), &fs) == 0 && fs.f_type == 0x01021994 /* TMPFS_MAGIC */) {
    // On tmpfs a hole that is read through a mapping becomes real memory for the file's life: 2 GiB.
    WARN("skipped: the temp directory " << dir.path() << " is tmpfs; set TMPDIR to a disk-backed directory");
    return;
  }
  constexpr int64_t kRows = 512 * 1024;
  constexpr int64_t kFeatures = 1024;
  const std::string inputs = dir.file("x.npy");
  const std::string header = npy_header(dict("<f4", "(" + std::to_string(kRows) + ", " + std::to_string(kFeatures) + ")"));
  {
    std::ofstream(inputs, std::ios::binary) << header;
  }
  const auto file_size = static_cast<int64_t>(header.size()) + kRows * kFeatures * 4;
  REQUIRE(::truncate(inputs.c_str(), file_size) == 0);
  const std::string targets = dir.file("y.npy");
  {
    std::ofstream(targets, std::ios::binary) << npy_header(dict("<f4", "(" + std::to_string(kRows) + ",)"));
  }
  REQUIRE(::truncate(targets.c_str(), static_cast<off_t>(std::filesystem::file_size(targets)) + kRows * 4) == 0);

  DataSpec spec;
  spec.kind = DataKind::Npy;
  spec.inputs = inputs;
  spec.targets = targets;
  spec.shuffle = false;
  const auto dataset = make_dataset(spec, Split::Train);
  REQUIRE(dataset->size() == kRows);
  DistributedSampler sampler(dataset->size(), 1, 0, spec, 0);

  // Peak RSS from here on: writing "5" to clear_refs resets VmHWM to the current RSS (Linux >= 4.0).
  bool hwm_reset = false;
  if (const int fd = ::open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC); fd >= 0) {
    hwm_reset = ::write(fd, "5", 1) == 1;
    ::close(fd);
  }
  const int64_t rss_before = status_kib("VmRSS");
  int64_t rss_max = rss_before;
  int64_t rows_seen = 0;
  double checksum = 0;
  const auto start = std::chrono::steady_clock::now();
  const int batch_size = 1024;
  for (int64_t b = 0; b < sampler.num_batches(batch_size); ++b) {
    const Batch batch = dataset->gather(sampler.batch_indices(b, batch_size));
    rows_seen += batch.size();
    const float* f = batch.inputs[0].data<float>();
    checksum += f[0] + f[batch.inputs[0].numel() - 1];
    rss_max = std::max(rss_max, status_kib("VmRSS"));
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const int64_t hwm = status_kib("VmHWM");
  const int64_t rss_after = status_kib("VmRSS");
  const auto* npy = dynamic_cast<const NpyDataset*>(dataset.get());
  REQUIRE(npy != nullptr);

  std::ostringstream report;
  report << "npy memory: file " << file_size << " bytes (" << (file_size >> 20) << " MiB), " << rows_seen
         << " rows in " << sampler.num_batches(batch_size) << " batches of " << batch_size << " in " << seconds
         << " s; VmRSS before " << rss_before / 1024 << " MiB, max sampled " << rss_max / 1024 << " MiB, after "
         << rss_after / 1024 << " MiB; VmHWM " << hwm / 1024 << " MiB" << (hwm_reset ? " (reset before the loop)" : " (not reset: clear_refs refused)")
         << "; " << npy->page_releases() << " page releases";
  std::cout << report.str() << std::endl;

  CHECK(rows_seen == kRows);
  CHECK(checksum == 0);  // a hole reads as zeros
  CHECK(npy->page_releases() >= 16);
  // A memory bound, not a timing: the resident growth stays far below the 2 GiB the pass touched. Under
  // ASan or TSan the resident set also holds the sanitizer's shadow of every page the pass touched (8 GiB
  // under TSan): there the bound would measure the sanitizer, and only a plain build checks it.
  if (kSanitizerShadow) {
    WARN("the resident-set bound is not checked in a sanitizer build (shadow memory)");
    return;
  }
  constexpr int64_t kBoundKib = 256 * 1024;
  REQUIRE(rss_max - rss_before < kBoundKib);
  if (hwm_reset) REQUIRE(hwm - rss_before < kBoundKib);
}

}  // namespace
}  // namespace braid::runtime
