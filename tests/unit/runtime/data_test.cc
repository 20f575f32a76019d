// Datasets (runtime/data/dataset.h): Batch views; the synthetic teacher's determinism, label shapes and
// disjoint test split; CSV files, good and each malformed kind with its message; binary files round trip
// and reject corruption; the hybrid job's sixteen examples and its trainers' blocks; the committed digits
// files.
#include <catch2/catch.hpp>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <unistd.h>

#include "base/error.h"
#include "runtime/data/binary_dataset.h"
#include "runtime/data/dataset.h"
#include "runtime/job/job_spec.h"
#include "tensor/compare.h"
#include "tensor/factory.h"
#include "tests/support/temp_dir.h"

namespace braid::runtime {
namespace {

using testing::TempDir;

DataSpec csv_spec(const std::string& path) {
  DataSpec spec;
  spec.kind = DataKind::Csv;
  spec.path = path;
  return spec;
}

std::vector<std::vector<float>> rows_of(const Tensor& features) {
  const std::vector<float> flat = to_vector<float>(features);
  const auto width = static_cast<size_t>(features.size(1));
  std::vector<std::vector<float>> rows;
  for (size_t i = 0; i < flat.size(); i += width) rows.emplace_back(flat.begin() + i, flat.begin() + i + width);
  return rows;
}

Batch everything(const Dataset& d) {
  std::vector<int64_t> all(static_cast<size_t>(d.size()));
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
  return d.gather(all);
}

TEST_CASE("Batch: size and slices that are views", "[runtime][data]") {
  Batch b;
  b.inputs = {arange(0, 12, 1, DType::Float32).view({6, 2}), arange(6)};
  b.target = arange(10, 16);
  CHECK(b.size() == 6);
  const Batch s = b.slice(2, 5);
  CHECK(s.size() == 3);
  CHECK(s.inputs[0].shares_storage_with(b.inputs[0]));
  CHECK(to_vector<float>(s.inputs[0]) == std::vector<float>{4, 5, 6, 7, 8, 9});
  CHECK(to_vector<int64_t>(s.inputs[1]) == std::vector<int64_t>{2, 3, 4});
  CHECK(to_vector<int64_t>(s.target) == std::vector<int64_t>{12, 13, 14});
  CHECK(b.slice(6, 6).size() == 0);
  CHECK_THROWS_WITH(b.slice(4, 7), Catch::Contains("rows [4, 7) are not within the batch's 6 rows"));
  CHECK_THROWS_AS(b.slice(3, 2), InvalidArgument);
  CHECK(Batch{}.size() == 0);
}

TEST_CASE("synthetic data: deterministic, shaped, labelled by its teacher", "[runtime][data]") {
  DataSpec spec;  // synthetic: 1024 samples, 16 features, 4 classes
  spec.seed = 3;
  const auto a = make_dataset(spec, Split::Train);
  const auto b = make_dataset(spec, Split::Train);
  REQUIRE(a->size() == 1024);
  CHECK(a->num_features() == 16);
  CHECK(a->num_classes() == 4);
  const Batch ba = everything(*a);
  const Batch bb = everything(*b);
  REQUIRE(ba.inputs.size() == 1);
  CHECK(ba.inputs[0].shape() == Shape{1024, 16});
  CHECK(ba.inputs[0].dtype() == DType::Float32);
  CHECK(ba.target.shape() == Shape{1024});
  CHECK(ba.target.dtype() == DType::Int64);
  CHECK(equal(ba.inputs[0], bb.inputs[0]));
  CHECK(equal(ba.target, bb.target));

  // Features in [-1, 1); every class occurs, none dominates.
  for (const float v : to_vector<float>(ba.inputs[0])) REQUIRE((-1.0f <= v && v < 1.0f));
  std::vector<int> per_class(4, 0);
  for (const int64_t y : to_vector<int64_t>(ba.target)) {
    REQUIRE((0 <= y && y < 4));
    ++per_class[static_cast<size_t>(y)];
  }
  for (const int c : per_class) CHECK((c > 1024 / 16 && c < 1024 / 2));

  // Another seed is another teacher and other samples.
  spec.seed = 4;
  const Batch other = everything(*make_dataset(spec, Split::Train));
  CHECK_FALSE(equal(other.inputs[0], ba.inputs[0]));

  // gather picks rows in the order asked, repeats allowed, as copies.
  const Batch picked = a->gather({5, 0, 5});
  CHECK(rows_of(picked.inputs[0]) ==
        std::vector<std::vector<float>>{rows_of(ba.inputs[0])[5], rows_of(ba.inputs[0])[0], rows_of(ba.inputs[0])[5]});
  CHECK_FALSE(picked.inputs[0].shares_storage_with(ba.inputs[0]));
  CHECK_THROWS_WITH(a->gather({0, 1024}),
                    Catch::Contains("sample index 1024 (position 1 of the batch) is out of range for 1024 samples"));
  CHECK_THROWS_AS(a->gather({-1}), InvalidArgument);
  const Batch none = a->gather({});
  CHECK(none.size() == 0);
  CHECK(none.inputs[0].shape() == Shape{0, 16});
}

TEST_CASE("synthetic data: the test split is disjoint, a quarter the size, deterministic", "[runtime][data]") {
  DataSpec spec;
  spec.num_samples = 400;
  spec.num_features = 1;  // the fewest distinct rows; a collision would be redrawn (rare even here)
  spec.num_classes = 3;
  const auto train = make_dataset(spec, Split::Train);
  const auto test = make_dataset(spec, Split::Test);
  REQUIRE(test != nullptr);
  CHECK(test->size() == 100);
  CHECK(test->num_classes() == 3);
  const auto train_rows = rows_of(everything(*train).inputs[0]);
  const std::set<std::vector<float>> seen(train_rows.begin(), train_rows.end());
  for (const auto& row : rows_of(everything(*test).inputs[0])) CHECK(seen.count(row) == 0);
  CHECK(equal(everything(*test).inputs[0], everything(*make_dataset(spec, Split::Test)).inputs[0]));
}

TEST_CASE("synthetic data: a linear model learns the teacher and generalises to the test split", "[runtime][data]") {
  // Softmax regression by full-batch gradient descent, written out: the labels must carry the teacher's
  // signal (a few flipped by the noise), and the test split must come from the same teacher.
  DataSpec spec;  // 1024 x 16, 4 classes
  spec.seed = 11;
  const Batch train = everything(*make_dataset(spec, Split::Train));
  const Batch test = everything(*make_dataset(spec, Split::Test));
  const int f = 16;
  const int c = 4;
  std::vector<double> w(static_cast<size_t>(c * (f + 1)), 0.0);  // row k: weights, then bias
  auto logits = [&](const float* x, int k) {
    double z = w[static_cast<size_t>(k * (f + 1) + f)];
    for (int j = 0; j < f; ++j) z += w[static_cast<size_t>(k * (f + 1) + j)] * x[j];
    return z;
  };
  auto accuracy = [&](const Batch& b) {
    const std::vector<float> x = to_vector<float>(b.inputs[0]);
    const std::vector<int64_t> y = to_vector<int64_t>(b.target);
    int right = 0;
    for (size_t i = 0; i < y.size(); ++i) {
      int best = 0;
      for (int k = 1; k < c; ++k) {
        if (logits(&x[i * f], k) > logits(&x[i * f], best)) best = k;
      }
      right += best == y[i];
    }
    return static_cast<double>(right) / static_cast<double>(y.size());
  };
  const std::vector<float> x = to_vector<float>(train.inputs[0]);
  const std::vector<int64_t> y = to_vector<int64_t>(train.target);
  const auto n = static_cast<double>(y.size());
  for (int step = 0; step < 300; ++step) {
    std::vector<double> grad(w.size(), 0.0);
    for (size_t i = 0; i < y.size(); ++i) {
      double z[4];
      double zmax = -1e300;
      for (int k = 0; k < c; ++k) zmax = std::max(zmax, z[k] = logits(&x[i * f], k));
      double sum = 0;
      for (double& v : z) sum += (v = std::exp(v - zmax));
      for (int k = 0; k < c; ++k) {
        const double g = z[k] / sum - (k == y[i] ? 1.0 : 0.0);
        for (int j = 0; j < f; ++j) grad[static_cast<size_t>(k * (f + 1) + j)] += g * x[i * f + j];
        grad[static_cast<size_t>(k * (f + 1) + f)] += g;
      }
    }
    for (size_t p = 0; p < w.size(); ++p) w[p] -= 2.0 * grad[p] / n;
  }
  CHECK(accuracy(train) > 0.9);
  CHECK(accuracy(test) > 0.85);
}

TEST_CASE("synthetic data: regression targets and feature_scale", "[runtime][data]") {
  DataSpec spec;
  spec.num_samples = 64;
  spec.num_features = 5;
  spec.num_classes = 0;
  const auto d = make_dataset(spec, Split::Train);
  CHECK(d->num_classes() == 0);
  const Batch b = d->gather({0, 1, 2});
  CHECK(b.target.shape() == Shape{3, 1});
  CHECK(b.target.dtype() == DType::Float32);

  spec.feature_scale = 2.0;
  const Batch scaled = make_dataset(spec, Split::Train)->gather({0, 1, 2});
  CHECK(equal(scaled.inputs[0], b.inputs[0].mul(full({3, 5}, 2.0))));
  CHECK(equal(scaled.target, b.target));  // the teacher sees unscaled features

  spec.num_classes = 1;
  CHECK_THROWS_WITH(make_dataset(spec, Split::Train), Catch::Contains("data.num_classes is 1"));
  spec.num_classes = 2;
  spec.num_samples = 0;
  CHECK_THROWS_WITH(make_dataset(spec, Split::Train), Catch::Contains("data.num_samples is 0"));
}

TEST_CASE("CSV: header, blank lines, CRLF, padding, column selection and scale", "[runtime][data]") {
  TempDir dir;
  const std::string path = dir.write("good.csv",
                                     "a,b,label,c\r\n"
                                     "1, 2.5 ,2,-3\r\n"
                                     "\r\n"
                                     "+4,5e-1,0,6\n"
                                     "7,8,1,9");  // no final newline
  DataSpec spec = csv_spec(path);
  spec.header = true;
  spec.label_column = -2;
  SECTION("every other column, in order") {
    const auto d = make_dataset(spec, Split::Train);
    REQUIRE(d->size() == 3);
    CHECK(d->num_features() == 3);
    CHECK(d->num_classes() == 3);
    const Batch b = everything(*d);
    CHECK(to_vector<float>(b.inputs[0]) == std::vector<float>{1, 2.5f, -3, 4, 0.5f, 6, 7, 8, 9});
    CHECK(to_vector<int64_t>(b.target) == std::vector<int64_t>{2, 0, 1});
  }
  SECTION("chosen columns, negative from the end, scaled") {
    spec.label_column = 2;
    spec.feature_columns = {-1, 0};
    spec.feature_scale = 0.5;
    const Batch b = everything(*make_dataset(spec, Split::Train));
    CHECK(to_vector<float>(b.inputs[0]) == std::vector<float>{-1.5f, 0.5f, 3, 2, 4.5f, 3.5f});
  }
  SECTION("no test file: no test split") { CHECK(make_dataset(spec, Split::Test) == nullptr); }
  SECTION("a test file") {
    spec.test_path = dir.write("test.csv", "x,y,label,z\n1,1,4,1\n");
    const auto t = make_dataset(spec, Split::Test);
    REQUIRE(t != nullptr);
    CHECK(t->size() == 1);
    CHECK(t->num_classes() == 5);
  }
}

TEST_CASE("CSV: each kind of malformed file names file, line and column", "[runtime][data]") {
  TempDir dir;
  auto error_of = [&](const std::string& text, DataSpec spec = {}) {
    spec.kind = DataKind::Csv;
    spec.path = dir.write("bad.csv", text);
    try {
      make_dataset(spec, Split::Train);
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string file = dir.write("bad.csv", "");
  CHECK(error_of("1,2,0\n1,abc,1\n") == file + ":2: column 1: 'abc' is not a number");
  CHECK(error_of("1,2,0\n1,2\n") == file + ":2: 2 columns, expected 3 as on line 1");
  CHECK(error_of("1,2,0\n\n1,2,0,4\n") == file + ":3: 4 columns, expected 3 as on line 1");
  CHECK(error_of("") == file + ": no data rows (the file is empty)");
  DataSpec with_header;
  with_header.header = true;
  CHECK(error_of("a,b,c\n", with_header) == file + ": no data rows (only a header)");
  CHECK(error_of("a,b\n1,2,0\n", with_header) == file + ":2: 3 columns, expected 2 as on line 1");
  CHECK(error_of("\n \n") == file + ": no data rows (only blank lines)");
  CHECK(error_of("1,2,0.5\n") == file + ":1: column 2 (the label): 0.5 is not an integer class id");
  CHECK(error_of("1,2,0\n1,2,-1\n") == file + ":2: column 2 (the label): class id -1 is not in [0, 1048576)");
  CHECK(error_of("1,,0\n") == file + ":1: column 1: the field is empty");
  CHECK(error_of("1,nan,0\n") == file + ":1: column 1: 'nan' is not a finite number");
  CHECK(error_of("1,2 3,0\n") == file + ":1: column 1: '2 3' is not a number");
  DataSpec label_far;
  label_far.label_column = -4;
  CHECK(error_of("1,2,0\n", label_far) == file + ": data.label_column -4 is out of range for 3 columns");
  DataSpec label_in_features;
  label_in_features.feature_columns = {0, 2};
  CHECK(error_of("1,2,0\n", label_in_features) == file + ": data.feature_columns: column 2 is the label column");
  DataSpec twice;
  twice.feature_columns = {1, -2};
  CHECK(error_of("1,2,0\n", twice) == file + ": data.feature_columns: column -2 is listed twice");
  DataSpec far;
  far.feature_columns = {3};
  CHECK(error_of("1,2,0\n", far) == file + ": data.feature_columns: column 3 is out of range for 3 columns");
  DataSpec only_label;
  CHECK(error_of("0\n1\n", only_label) == file + ": no feature columns: the data has only the label column");

  CHECK_THROWS_WITH(make_dataset(csv_spec(dir.write("x", "") + ".missing"), Split::Train),
                    Catch::Contains(".missing: cannot open the data file"));
  CHECK_THROWS_WITH(make_dataset(csv_spec(""), Split::Train), Catch::Contains("data.path is empty"));
}

TEST_CASE("binary files: classes and regression round trip, and corruption is rejected", "[runtime][data]") {
  TempDir dir;
  const Tensor x = arange(0, 12, 1, DType::Float32).view({4, 3});
  DataSpec spec;
  spec.kind = DataKind::Binary;
  SECTION("class ids, selected columns, scaled") {
    spec.path = dir.write("train.brsd", "");
    save_binary_dataset(spec.path, x, from_vector(std::vector<int32_t>{0, 2, 1, 2}));
    spec.feature_columns = {2, 0};
    spec.feature_scale = 0.5;
    const auto d = make_dataset(spec, Split::Train);
    CHECK(d->size() == 4);
    CHECK(d->num_features() == 2);
    CHECK(d->num_classes() == 3);
    const Batch b = d->gather({3, 0});
    CHECK(to_vector<float>(b.inputs[0]) == std::vector<float>{5.5f, 4.5f, 1, 0});
    CHECK(b.target.dtype() == DType::Int64);
    CHECK(to_vector<int64_t>(b.target) == std::vector<int64_t>{2, 0});
  }
  SECTION("regression targets from float64") {
    spec.path = dir.write("reg.brsd", "");
    save_binary_dataset(spec.path, x.to(DType::Float64), from_vector(std::vector<double>{0.5, -1, 2, 3}));
    const auto d = make_dataset(spec, Split::Train);
    CHECK(d->num_classes() == 0);
    const Batch b = everything(*d);
    CHECK(equal(b.inputs[0], x));
    CHECK(b.target.shape() == Shape{4, 1});
    CHECK(to_vector<float>(b.target) == std::vector<float>{0.5f, -1, 2, 3});
  }
  SECTION("the writer refuses what the loader would") {
    const std::string p = dir.write("w.brsd", "");
    CHECK_THROWS_WITH(save_binary_dataset(p, x, arange(3)),
                      Catch::Contains("'features' has 4 rows but 'labels' has 3"));
    CHECK_THROWS_WITH(save_binary_dataset(p, arange(4), arange(4)),
                      Catch::Contains("must be a floating (N, F) matrix"));
    CHECK_THROWS_WITH(save_binary_dataset(p, x, from_vector(std::vector<int64_t>{0, 1, -2, 1})),
                      Catch::Contains("class id -2"));
    CHECK_THROWS_WITH(save_binary_dataset(p, x, arange(8).view({4, 2})), Catch::Contains("'labels' must be (N,)"));
  }
  SECTION("a corrupted, truncated or foreign file names the path") {
    spec.path = dir.write("bad.brsd", "");
    save_binary_dataset(spec.path, x, arange(4));
    std::string bytes;
    {
      std::ifstream in(spec.path, std::ios::binary);
      bytes.assign(std::istreambuf_iterator<char>(in), {});
    }
    std::string flipped = bytes;
    flipped[bytes.size() / 2] = static_cast<char>(flipped[bytes.size() / 2] ^ 0x10);
    dir.write("bad.brsd", flipped);
    CHECK_THROWS_WITH(make_dataset(spec, Split::Train), Catch::Contains(spec.path));
    dir.write("bad.brsd", bytes.substr(0, bytes.size() - 7));
    CHECK_THROWS_WITH(make_dataset(spec, Split::Train), Catch::Contains(spec.path));
    dir.write("bad.brsd", "a,b,c\n1,2,3\n");
    CHECK_THROWS_AS(make_dataset(spec, Split::Train), InvalidArgument);
  }
}

TEST_CASE("hybrid_examples: get_training_examples()'s sixteen examples, and trainer t gets block t",
          "[runtime][data]") {
  DataSpec spec;
  spec.kind = DataKind::HybridExamples;
  spec.partition = Partition::Contiguous;
  spec.shuffle = false;
  const auto d = make_dataset(spec, Split::Train);
  REQUIRE(d->size() == 16);
  CHECK(d->num_classes() == 0);
  CHECK(d->num_features() == 0);
  CHECK(make_dataset(spec, Split::Test) == nullptr);

  // get_training_examples() of PyTorch's ddp_under_dist_autograd_test.py: value, x, y, z written out from
  // its loops.
  const float kRows[16][4] = {{-1, 1, -1, 0}, {-1, 1, -1, 1}, {-1, 1, 1, 0},  {-1, 1, 1, 1},
                              {-1, -1, -1, 0}, {-1, -1, -1, 1}, {-1, -1, 1, 0}, {-1, -1, 1, 1},
                              {1, -1, 1, 0},  {1, -1, 1, 1},  {1, -1, -1, 0}, {1, -1, -1, 1},
                              {1, 1, 1, 0},   {1, 1, 1, 1},   {1, 1, -1, 0},  {1, 1, -1, 1}};
  for (int t = 0; t < 4; ++t) {
    DistributedSampler sampler(d->size(), 4, t, spec, /*seed=*/0);
    REQUIRE(sampler.num_batches(4) == 1);
    const Batch b = d->gather(sampler.batch_indices(0, 4));
    REQUIRE(b.inputs.size() == 2);
    CHECK(b.inputs[0].shape() == Shape{4, 2});
    CHECK(b.inputs[0].dtype() == DType::Float32);
    CHECK(b.inputs[1].shape() == Shape{4});
    CHECK(b.inputs[1].dtype() == DType::Int64);
    CHECK(b.target.shape() == Shape{4});
    CHECK(b.target.dtype() == DType::Float32);
    std::vector<float> dense;
    std::vector<int64_t> sparse;
    std::vector<float> values;
    for (int r = 4 * t; r < 4 * t + 4; ++r) {
      dense.insert(dense.end(), {kRows[r][1], kRows[r][2]});
      sparse.push_back(static_cast<int64_t>(kRows[r][3]));
      values.push_back(kRows[r][0]);
    }
    CAPTURE(t);
    CHECK(to_vector<float>(b.inputs[0]) == dense);
    CHECK(to_vector<int64_t>(b.inputs[1]) == sparse);
    CHECK(to_vector<float>(b.target) == values);
  }
}

TEST_CASE("the committed digits files load as the example's job reads them", "[runtime][data]") {
  // The data section examples/data/README.md gives, through the job-file parser (relative to the folder).
  const auto folder = std::filesystem::path(__FILE__).parent_path() / "../../../examples/data";
  const JobSpec job = parse_job_text(
      "roles: {trainers: 4}\nmodel: {kind: mlp}\n"
      "data: {kind: csv, path: digits_train.csv, test_path: digits_test.csv, header: true, label_column: -1,\n"
      "       feature_scale: 0.0625}\n",
      "digits.yaml", folder.lexically_normal().string());
  const DataSpec& spec = job.data;
  const auto train = make_dataset(spec, Split::Train);
  const auto test = make_dataset(spec, Split::Test);
  REQUIRE(test != nullptr);
  CHECK(train->size() == 1442);
  CHECK(test->size() == 355);
  for (const Dataset* d : {train.get(), test.get()}) {
    CHECK(d->num_features() == 64);
    CHECK(d->num_classes() == 10);
    const Batch b = everything(*d);
    std::set<int64_t> digits;
    for (const int64_t y : to_vector<int64_t>(b.target)) digits.insert(y);
    CHECK(digits.size() == 10);
    for (const float v : to_vector<float>(b.inputs[0])) REQUIRE((0.0f <= v && v <= 1.0f));
  }
}

}  // namespace
}  // namespace braid::runtime
