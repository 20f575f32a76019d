// The meta encoding of Values: round trips of every kind (sparse tensors included) and malformed input
// rejected with WireError naming what is wrong, never read past the end or allocated from a bad count.
#include <catch2/catch.hpp>

#include "rpc/value_codec.h"
#include "tensor/compare.h"
#include "tensor/factory.h"
#include "tensor/sparse.h"

using namespace braid;
using namespace braid::rpc;

namespace {

Value round_trip(const Value& v) {
  std::vector<uint8_t> meta;
  std::vector<Tensor> tensors;
  MetaWriter w(meta);
  encode_value(v, w, tensors, nullptr);
  MetaReader r(meta);
  Value out = decode_value(r, tensors, nullptr);
  r.expect_end("the value");
  return out;
}

Value decode_bytes(std::vector<uint8_t> bytes, const std::vector<Tensor>& tensors = {}) {
  MetaReader r(bytes);
  return decode_value(r, tensors, nullptr);
}

}  // namespace

TEST_CASE("values round trip through the meta encoding", "[rpc][codec]") {
  Dict d;
  d.set("a", Value(int64_t{1}));
  d.set("b", list({Value(2.5), Value("s"), Value()}));
  const Value v = tuple({Value(false), Value(int64_t{-1} << 40), Value(d), Value(std::string(1000, 'x'))});
  const Value out = round_trip(v);
  CHECK(out.as_tuple()[1].as_int() == int64_t{-1} << 40);
  CHECK(out.as_tuple()[2].as_dict().find("b")->as_list()[1].as_string() == "s");
  CHECK(out.as_tuple()[3].as_string().size() == 1000);
}

TEST_CASE("sparse COO tensors round trip", "[rpc][codec]") {
  const SparseTensor sp(from_vector<int64_t>({0, 2, 1, 0}, {2, 2}), from_vector<float>({3, 4}), {3, 2});
  const Value out = round_trip(Value(sp.to_tensor()));
  REQUIRE(out.as_tensor().is_sparse());
  CHECK(equal(out.as_tensor().sparse().to_dense(), sp.to_dense()));
}

TEST_CASE("objects travel as their to_value() form, or not at all", "[rpc][codec]") {
  struct Plain final : Object {
    const std::string& type_name() const override {
      static const std::string n = "Plain";
      return n;
    }
  };
  CHECK_THROWS_WITH(round_trip(Value(std::shared_ptr<Object>(std::make_shared<Plain>()))),
                    Catch::Contains("class 'Plain' cannot be sent"));
  CHECK_THROWS_WITH(round_trip(Value(RRef())), Catch::Contains("null RRef"));
}

TEST_CASE("malformed meta is rejected with WireError", "[rpc][codec]") {
  CHECK_THROWS_AS(decode_bytes({}), WireError);                                  // empty
  CHECK_THROWS_WITH(decode_bytes({77}), Catch::Contains("unknown value kind 77"));
  CHECK_THROWS_WITH(decode_bytes({2, 1, 2}), Catch::Contains("truncated reading int"));
  // A string claiming 1 GiB in 4 bytes.
  CHECK_THROWS_WITH(decode_bytes({4, 0, 0, 0, 0x40}), Catch::Contains("string of 1073741824 bytes"));
  // A list claiming 4 billion items: refused before allocating.
  CHECK_THROWS_WITH(decode_bytes({6, 0xff, 0xff, 0xff, 0xff}), Catch::Contains("list of 4294967295 items"));
  // A tensor index beyond the message's tensors.
  CHECK_THROWS_WITH(decode_bytes({5, 3, 0, 0, 0}), Catch::Contains("tensor index 3 out of range"));
  // Nesting deeper than the limit.
  std::vector<uint8_t> deep;
  for (int i = 0; i < 200; ++i) deep.insert(deep.end(), {6, 1, 0, 0, 0});
  deep.push_back(0);
  CHECK_THROWS_WITH(decode_bytes(deep), Catch::Contains("nested deeper than"));
  // An RRef where no agent can decode it.
  std::vector<uint8_t> rref = {9};
  rref.resize(1 + 4 + 12 + 12 + 4, 0);
  CHECK_THROWS_WITH(decode_bytes(rref), Catch::Contains("RRef arrived where none can be decoded"));
}
