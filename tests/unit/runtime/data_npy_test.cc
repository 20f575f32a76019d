// NumPy data (data.kind: npy; runtime/data/npy_file.h, npy_dataset.h): every dtype and format version read
// back from files written here by hand, the header's spellings, every malformed file with the words of its
// message, the dataset's classes, regression targets, scaling and errors, and the shards of
// DistributedSampler over an npy dataset. The job keys, the committed digits files and the 2 GiB file:
// data_npy_files_test.cc.
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

namespace braid::runtime {
namespace {

using Catch::Matchers::Contains;
using data::NpyDataset;
using data::NpyFile;
using testing::TempDir;
using testing::error_of;
using namespace npy_test;

TEST_CASE("npy: every supported dtype reads back, converted to float32 features", "[runtime][data][npy]") {
  TempDir dir("npy_dtypes");
  const std::string y = write_npy(dir, "y.npy", "<i8", "(2,)", raw<int64_t>({0, 1}));
  struct Case {
    std::string descr;
    DType dtype;
    std::string bytes;
  };
  const std::vector<Case> cases = {
      {"<f4", DType::Float32, raw<float>({0.5f, -1.25f, 3, 4, 5, 6})},
      {"<f8", DType::Float64, raw<double>({0.5, -1.25, 3, 4, 5, 6})},
      {"<i4", DType::Int32, raw<int32_t>({0, -1, 3, 4, 5, 6})},
      {"<i8", DType::Int64, raw<int64_t>({0, -1, 3, 4, 5, 6})},
      {"|u1", DType::UInt8, raw<uint8_t>({0, 255, 3, 4, 5, 6})},
      {"<u1", DType::UInt8, raw<uint8_t>({0, 255, 3, 4, 5, 6})},
  };
  for (const Case& c : cases) {
    CAPTURE(c.descr);
    const std::string x = write_npy(dir, "x.npy", c.descr, "(2, 3)", c.bytes);
    NpyFile file(x);
    CHECK(file.version_major() == 1);
    CHECK(file.descr() == c.descr);
    CHECK(file.dtype() == c.dtype);
    CHECK(file.shape() == std::vector<int64_t>{2, 3});
    CHECK(file.numel() == 6);
    CHECK(file.nbytes() == c.bytes.size());
    CHECK(std::string(reinterpret_cast<const char*>(file.data()), file.nbytes()) == c.bytes);
    CHECK(file.data_offset() % 64 == 0);

    NpyDataset d(x, y, 1.0);
    CHECK(d.size() == 2);
    CHECK(d.num_features() == 3);
    const Batch b = d.gather({1, 0});
    CHECK(b.inputs[0].dtype() == DType::Float32);
    CHECK(b.inputs[0].shape() == Shape{2, 3});
    const std::vector<float> v = to_vector<float>(b.inputs[0]);
    CHECK(std::vector<float>(v.begin(), v.begin() + 3) == std::vector<float>{4, 5, 6});
    const float second = c.dtype == DType::UInt8 ? 255.0f : c.dtype == DType::Int32 || c.dtype == DType::Int64 ? -1.0f
                                                                                                               : -1.25f;
    CHECK(std::vector<float>(v.begin() + 3, v.end()) ==
          std::vector<float>{c.dtype == DType::Float32 || c.dtype == DType::Float64 ? 0.5f : 0.0f, second, 3});
  }
}

TEST_CASE("npy: format versions 1.0, 2.0 and 3.0", "[runtime][data][npy]") {
  TempDir dir("npy_versions");
  const std::string bytes = raw<float>({1, 2, 3, 4, 5, 6});
  for (const int major : {1, 2, 3}) {
    CAPTURE(major);
    const std::string path = write_npy(dir, "v.npy", "<f4", "(3, 2)", bytes, major);
    NpyFile f(path);
    CHECK(f.version_major() == major);
    CHECK(f.data_offset() == 128);  // np.save pads the whole header to a multiple of 64 bytes
    CHECK(f.shape() == std::vector<int64_t>{3, 2});
    CHECK(std::string(reinterpret_cast<const char*>(f.data()), f.nbytes()) == bytes);
  }
  // Version 2.0's length field is 32 bits: a header longer than 65535 bytes.
  std::string long_dict = dict("<f4", "(3, 2)");
  long_dict.insert(long_dict.size() - 1, std::string(70000, ' '));
  NpyFile f(dir.write("long.npy", npy_header(long_dict, 2) + bytes));
  CHECK(f.data_offset() > 70000);
  CHECK(f.shape() == std::vector<int64_t>{3, 2});
}

TEST_CASE("npy: the header's spellings as Python writes them", "[runtime][data][npy]") {
  const auto parse = [](const std::string& text) { return data::parse_npy_header(text, "h.npy"); };
  data::NpyHeader h = parse("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }\n");
  CHECK(h.descr == "<f4");
  CHECK_FALSE(h.fortran_order);
  CHECK(h.shape == std::vector<int64_t>{3, 4});
  // Any order, double quotes, no spaces, no trailing comma, newlines and tabs, True.
  h = parse("{\"shape\":(5,),\"fortran_order\":True,\"descr\":\"|u1\"}");
  CHECK(h.shape == std::vector<int64_t>{5});
  CHECK(h.fortran_order);
  CHECK(h.descr == "|u1");
  h = parse("  {\n\t'descr' : '<i8' ,\n 'fortran_order' : False ,\n 'shape' : ( 2 , 3 , ) ,\n}   \n");
  CHECK(h.shape == std::vector<int64_t>{2, 3});
  CHECK(parse("{'descr': '<f8', 'fortran_order': False, 'shape': (), }").shape.empty());
  CHECK(parse("{'descr': '<f8', 'fortran_order': False, 'shape': (7L, 2L), }").shape ==
        std::vector<int64_t>{7, 2});  // Python 2's longs
  CHECK(data::shape_text({5}) == "(5,)");
  CHECK(data::shape_text({}) == "()");
  CHECK(data::shape_text({3, 4}) == "(3, 4)");
}

TEST_CASE("npy: malformed headers are refused, saying what is wrong where", "[runtime][data][npy]") {
  const auto error = [](const std::string& text) {
    return error_of([&] { data::parse_npy_header(text, "h.npy"); });
  };
  CHECK_THAT(error("['descr', '<f4']"), Contains("h.npy: bad .npy header: expected the header to be a dict literal"));
  CHECK_THAT(error("{'descr': '<f4', 'fortran_order': False}"), Contains("the key 'shape' is missing"));
  CHECK_THAT(error("{'descr': '<f4', 'fortran_order': False, 'shape': (5), }"),
             Contains("'shape' is not a tuple: a 1-tuple is written (N,)"));
  CHECK_THAT(error("{'descr': '<f4', 'descr': '<f8', 'fortran_order': False, 'shape': (5,)}"),
             Contains("the key 'descr' appears twice"));
  CHECK_THAT(error("{'descr': '<f4', 'fortran_order': False, 'shape': (5,), 'extra': 1}"),
             Contains("unknown key 'extra'"));
  CHECK_THAT(error("{'descr': '<f4', 'fortran_order': false, 'shape': (5,)}"),
             Contains("expected True or False for 'fortran_order'"));
  CHECK_THAT(error("{'descr': '<f4', 'fortran_order': False, 'shape': (5, -1)}"), Contains("is negative"));
  CHECK_THAT(error("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}"),
             Contains("does not fit in 64 bits"));
  CHECK_THAT(error("{'descr': '<f4', 'fortran_order': False, 'shape': (5,)} x"),
             Contains("unexpected text after the dict's closing '}'"));
  CHECK_THAT(error("{'descr': '<f4' 'fortran_order': False, 'shape': (5,)}"),
             Contains("expected ',' or '}' after a value (at character 16"));
  CHECK_THAT(error("{'descr: '<f4', 'fortran_order': False, 'shape': (5,)}"), Contains("expected ':' after the key"));
  CHECK_THAT(error("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (5,)}"),
             Contains("structured dtypes"));
  CHECK_THAT(error("{'descr': '<f4', 'fortran_order': False, 'shape': (5,"), Contains("expected a dimension"));
  CHECK_THAT(error(""), Contains("expected the header to be a dict literal"));
}

TEST_CASE("npy: malformed files are refused with the path and the reason", "[runtime][data][npy]") {
  TempDir dir("npy_errors");
  const std::string floats = raw<float>({1, 2, 3, 4, 5, 6});
  SECTION("not a .npy file") {
    CHECK_THAT(open_error(dir.write("zip.npy", std::string("PK\x03\x04", 4) + std::string(100, 'x'))),
               Contains("zip.npy: not a .npy file (bad magic"));
    CHECK_THAT(open_error(dir.write("short.npy", "\x93NUM")), Contains("short.npy: not a .npy file (bad magic"));
    CHECK_THAT(open_error(dir.write("empty.npy", "")), Contains("empty.npy: not a .npy file"));
    CHECK_THAT(open_error(dir.file("missing.npy")), Contains("missing.npy: cannot open: No such file"));
  }
  SECTION("unsupported versions") {
    std::string bytes = npy_header(dict("<f4", "(3, 2)"), 1) + floats;
    bytes[6] = 4;
    CHECK_THAT(open_error(dir.write("v4.npy", bytes)),
               Contains("v4.npy: unsupported .npy format version 4.0 (supported: 1.0, 2.0, 3.0)"));
    bytes[6] = 1;
    bytes[7] = 1;
    CHECK_THAT(open_error(dir.write("v11.npy", bytes)), Contains("unsupported .npy format version 1.1"));
  }
  SECTION("a truncated header") {
    CHECK_THAT(open_error(dir.write("t1.npy", std::string("\x93NUMPY\x02", 7))),
               Contains("t1.npy: truncated header: the file ends within the format version"));
    CHECK_THAT(open_error(dir.write("t2.npy", std::string("\x93NUMPY\x02\x00\x10", 9))),
               Contains("t2.npy: truncated header: format 2.0 needs 12 bytes before the header, the file has 9"));
    const std::string full = npy_header(dict("<f4", "(3, 2)"));
    CHECK_THAT(open_error(dir.write("t3.npy", full.substr(0, 40))),
               Contains("t3.npy: the header length 118 runs past the end of the file (40 bytes, 30 after"));
  }
  SECTION("a header length past the end") {
    std::string bytes = npy_header(dict("<f4", "(3, 2)"), 2) + floats;
    bytes[11] = 0x7f;  // the top byte of the u32 length
    CHECK_THAT(open_error(dir.write("len.npy", bytes)), Contains("len.npy: the header length 2130706548 runs past"));
  }
  SECTION("a bad dict") {
    CHECK_THAT(open_error(dir.write("dict.npy", npy_header("{'descr': '<f4', 'shape': (3, 2)}") + floats)),
               Contains("dict.npy: bad .npy header: the key 'fortran_order' is missing"));
  }
  SECTION("dtypes") {
    CHECK_THAT(open_error(write_npy(dir, "c8.npy", "<c8", "(3,)", std::string(24, '\0'))),
               Contains("c8.npy: unsupported dtype '<c8' (supported: '<f4' float32, '<f8' float64, '<i4' int32, "
                        "'<i8' int64, '|u1' uint8, '<u1' uint8)"));
    CHECK_THAT(open_error(write_npy(dir, "be.npy", ">f4", "(3, 2)", floats)),
               Contains("be.npy: big-endian dtype '>f4' is not supported: save with a.astype('<f4')"));
    CHECK_THAT(open_error(write_npy(dir, "be2.npy", ">i2", "(3,)", std::string(6, '\0'))),
               Contains("be2.npy: big-endian dtype '>i2' is not supported (supported: '<f4'"));
    CHECK_THAT(open_error(write_npy(dir, "b1.npy", "|b1", "(3,)", std::string(3, '\1'))),
               Contains("b1.npy: bool arrays ('|b1') are not supported: save them as uint8"));
  }
  SECTION("Fortran order") {
    CHECK_THAT(open_error(write_npy(dir, "f.npy", "<f4", "(3, 2)", floats, 1, /*fortran=*/true)),
               Contains("f.npy: Fortran order is not supported (shape (3, 2)): save with np.ascontiguousarray(a)"));
    // Where the order changes nothing (one dimension larger than 1), it is the same bytes and is accepted.
    CHECK(NpyFile(write_npy(dir, "f1.npy", "<f4", "(6,)", floats, 1, true)).numel() == 6);
    CHECK(NpyFile(write_npy(dir, "f2.npy", "<f4", "(6, 1)", floats, 1, true)).numel() == 6);
  }
  SECTION("the data's length") {
    CHECK_THAT(open_error(write_npy(dir, "short.npy", "<f4", "(3, 2)", floats.substr(0, 20))),
               Contains("short.npy: truncated data: the shape (3, 2) of '<f4' needs 24 data bytes, the file has 20 "
                        "after its 128-byte header"));
    CHECK_THAT(open_error(write_npy(dir, "long.npy", "<f4", "(3, 2)", floats + "xx")),
               Contains("long.npy: extra bytes after the data: the shape (3, 2) of '<f4' needs 24 data bytes, the "
                        "file has 26"));
    CHECK_THAT(open_error(write_npy(dir, "huge.npy", "<f8", "(4611686018427387904, 4)", floats)),
               Contains("huge.npy: the shape (4611686018427387904, 4) has more than 2^63 elements"));
    CHECK_THAT(open_error(write_npy(dir, "huge2.npy", "<f8", "(2305843009213693952, 2)", floats)),
               Contains("huge2.npy: the shape (2305843009213693952, 2) of '<f8' needs more than 2^64 bytes"));
  }
}

TEST_CASE("npy dataset: class ids, regression targets, scaling and flattened rows", "[runtime][data][npy]") {
  TempDir dir("npy_dataset");
  SECTION("uint8 pixels (N, 2, 2) and int64 class ids") {
    const std::string x = write_npy(dir, "x.npy", "|u1", "(3, 2, 2)", raw<uint8_t>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 16}));
    const std::string y = write_npy(dir, "y.npy", "<i8", "(3,)", raw<int64_t>({2, 0, 4}));
    NpyDataset d(x, y, 0.0625);
    CHECK(d.size() == 3);
    CHECK(d.num_features() == 4);
    CHECK(d.num_classes() == 5);
    const Batch b = d.gather({2, 2, 0});
    CHECK(to_vector<float>(b.inputs[0]) == std::vector<float>{0.5f, 0.5625f, 0.625f, 1, 0.5f, 0.5625f, 0.625f, 1, 0,
                                                              0.0625f, 0.125f, 0.1875f});
    CHECK(b.target.dtype() == DType::Int64);
    CHECK(to_vector<int64_t>(b.target) == std::vector<int64_t>{4, 4, 2});
    // A batch is a copy: changing it leaves the dataset alone.
    b.inputs[0].fill_(7);
    CHECK(features_of(d, {2})[0] == 0.5f);
  }
  SECTION("int32 and uint8 class ids") {
    const std::string x = write_npy(dir, "x.npy", "<f4", "(2, 1)", raw<float>({1, 2}));
    CHECK(NpyDataset(x, write_npy(dir, "y4.npy", "<i4", "(2,)", raw<int32_t>({3, 1})), 1).num_classes() == 4);
    NpyDataset d(x, write_npy(dir, "y1.npy", "|u1", "(2,)", raw<uint8_t>({0, 9})), 1);
    CHECK(d.num_classes() == 10);
    CHECK(to_vector<int64_t>(d.gather({1}).target) == std::vector<int64_t>{9});
  }
  SECTION("floating targets (N,) and (N, 1) are regression values") {
    const std::string x = write_npy(dir, "x.npy", "<f8", "(2, 2)", raw<double>({1, 2, 3, 4}));
    for (const auto& [descr, shape, bytes] :
         {std::tuple{"<f4", "(2,)", raw<float>({0.5f, -2})}, std::tuple{"<f8", "(2, 1)", raw<double>({0.5, -2})}}) {
      NpyDataset d(x, write_npy(dir, "y.npy", descr, shape, bytes), 2.0);
      CHECK(d.num_classes() == 0);
      const Batch b = d.gather({1, 0});
      CHECK(b.target.dtype() == DType::Float32);
      CHECK(b.target.shape() == Shape{2, 1});
      CHECK(to_vector<float>(b.target) == std::vector<float>{-2, 0.5f});
      CHECK(to_vector<float>(b.inputs[0]) == std::vector<float>{6, 8, 2, 4});
    }
  }
  SECTION("errors name the files") {
    const std::string x = write_npy(dir, "x.npy", "<f4", "(3, 2)", raw<float>({1, 2, 3, 4, 5, 6}));
    const std::string y3 = write_npy(dir, "y3.npy", "<i8", "(3,)", raw<int64_t>({0, 1, 2}));
    const std::string y2 = write_npy(dir, "y2.npy", "<i8", "(2,)", raw<int64_t>({0, 1}));
    const std::string mismatch = error_of([&] { NpyDataset(x, y2, 1); });
    CHECK_THAT(mismatch, Contains(x + " has 3 rows but " + y2 + " has 2"));
    CHECK_THAT(mismatch, Contains("one row per sample"));
    const std::string negative = write_npy(dir, "neg.npy", "<i4", "(3,)", raw<int32_t>({0, -2, 1}));
    CHECK_THAT(error_of([&] { NpyDataset(x, negative, 1); }),
               Contains("neg.npy: row 1: class id -2 is negative (class ids are 0..C-1)"));
    const std::string huge = write_npy(dir, "huge.npy", "<i8", "(3,)", raw<int64_t>({0, 1, int64_t{1} << 40}));
    CHECK_THAT(error_of([&] { NpyDataset(x, huge, 1); }), Contains("huge.npy: row 2: class id 1099511627776 is not below"));
    const std::string nan = write_npy(dir, "nan.npy", "<f4", "(3,)", raw<float>({0, NAN, 1}));
    CHECK_THAT(error_of([&] { NpyDataset(x, nan, 1); }), Contains("nan.npy: row 1: the target nan is not a finite"));
    CHECK_THAT(error_of([&] { NpyDataset(y3, y3, 1); }),
               Contains("y3.npy: inputs must be (N, F, ...), a row of features per sample; got shape (3,)"));
    const std::string wide = write_npy(dir, "wide.npy", "<i8", "(3, 1)", raw<int64_t>({0, 1, 2}));
    CHECK_THAT(error_of([&] { NpyDataset(x, wide, 1); }),
               Contains("wide.npy: targets must be (N,) integer class ids or (N,) / (N, 1) floating values; got "
                        "shape (3, 1) of '<i8'"));
    const std::string none = write_npy(dir, "none.npy", "<f4", "(0, 4)", "");
    CHECK_THAT(error_of([&] { NpyDataset(none, y3, 1); }), Contains("none.npy: no data rows (shape (0, 4))"));
    const std::string flat = write_npy(dir, "flat.npy", "<f4", "(3, 0)", "");
    CHECK_THAT(error_of([&] { NpyDataset(flat, y3, 1); }), Contains("flat.npy: the rows have no features"));
    NpyDataset d(x, y3, 1);
    CHECK_THAT(error_of([&] { d.gather({0, 3}); }),
               Contains("x.npy: sample index 3 (position 1 of the batch) is out of range for 3 samples"));
  }
}

TEST_CASE("npy dataset: make_dataset reads the train and test splits", "[runtime][data][npy]") {
  TempDir dir("npy_make");
  DataSpec spec;
  spec.kind = DataKind::Npy;
  spec.inputs = write_npy(dir, "x.npy", "|u1", "(4, 2)", raw<uint8_t>({1, 2, 3, 4, 5, 6, 7, 8}));
  spec.targets = write_npy(dir, "y.npy", "<i8", "(4,)", raw<int64_t>({1, 0, 1, 0}));
  spec.feature_scale = 0.5;
  const auto train = make_dataset(spec, Split::Train);
  CHECK(train->size() == 4);
  CHECK(features_of(*train, {3}) == std::vector<float>{3.5f, 4});
  CHECK(make_dataset(spec, Split::Test) == nullptr);
  spec.test_inputs = write_npy(dir, "tx.npy", "|u1", "(1, 2)", raw<uint8_t>({9, 9}));
  spec.test_targets = write_npy(dir, "ty.npy", "<i8", "(1,)", raw<int64_t>({1}));
  const auto test = make_dataset(spec, Split::Test);
  CHECK(features_of(*test, {0}) == std::vector<float>{4.5f, 4.5f});
  spec.test_targets.clear();
  CHECK_THAT(error_of([&] { make_dataset(spec, Split::Test); }),
             Contains("data.test_inputs and data.test_targets are both required"));
}

TEST_CASE("npy dataset: DistributedSampler's shards on 2 and 3 trainers, drop_last or padded", "[runtime][data][npy]") {
  // Row i of the inputs is (i, 10 i) and its class i % 3, so a batch's features name the rows it holds.
  TempDir dir("npy_shards");
  std::vector<int32_t> x;
  std::vector<int64_t> y;
  for (int32_t i = 0; i < 7; ++i) {
    x.insert(x.end(), {i, 10 * i});
    y.push_back(i % 3);
  }
  DataSpec spec;
  spec.kind = DataKind::Npy;
  spec.inputs = write_npy(dir, "x.npy", "<i4", "(7, 2)", raw(x));
  spec.targets = write_npy(dir, "y.npy", "<i8", "(7,)", raw(y));
  const auto d = make_dataset(spec, Split::Train);

  // Every trainer's rows of one epoch, read back out of the batch of its whole share.
  const auto shards = [&](int replicas, bool shuffle, bool drop_last) {
    spec.shuffle = shuffle;
    spec.drop_last = drop_last;
    std::vector<Indices> out;
    for (int r = 0; r < replicas; ++r) {
      DistributedSampler sampler(d->size(), replicas, r, spec, /*seed=*/11);
      sampler.set_epoch(2);
      const Batch batch = d->gather(sampler.indices());
      const std::vector<float> f = to_vector<float>(batch.inputs[0]);
      const std::vector<int64_t> t = to_vector<int64_t>(batch.target);
      Indices rows;
      for (size_t k = 0; k < t.size(); ++k) {
        const auto row = static_cast<int64_t>(f[2 * k]);
        CHECK(f[2 * k + 1] == 10.0f * static_cast<float>(row));
        CHECK(t[k] == row % 3);
        rows.push_back(row);
      }
      CHECK(rows == sampler.indices());
      out.push_back(rows);
    }
    return out;
  };
  using Shards = std::vector<Indices>;
  // In order: 7 rows padded with the first ones to a multiple of the trainers (PyTorch's rule), or the
  // ragged tail dropped; trainer r takes every replicas-th row from r.
  CHECK(shards(2, false, false) == Shards{{0, 2, 4, 6}, {1, 3, 5, 0}});
  CHECK(shards(2, false, true) == Shards{{0, 2, 4}, {1, 3, 5}});
  CHECK(shards(3, false, false) == Shards{{0, 3, 6}, {1, 4, 0}, {2, 5, 1}});
  CHECK(shards(3, false, true) == Shards{{0, 3}, {1, 4}, {2, 5}});
  // Shuffled by (train.seed 11, epoch 2): the permutation 5 1 6 2 0 4 3 (from the Python transcription of the
  // shuffle in data_sampler_test.cc), then the same rules.
  CHECK(shards(2, true, false) == Shards{{5, 6, 0, 3}, {1, 2, 4, 5}});
  CHECK(shards(2, true, true) == Shards{{5, 6, 0}, {1, 2, 4}});
  CHECK(shards(3, true, false) == Shards{{5, 2, 3}, {1, 0, 5}, {6, 4, 1}});
  CHECK(shards(3, true, true) == Shards{{5, 2}, {1, 0}, {6, 4}});
}

}  // namespace
}  // namespace braid::runtime
