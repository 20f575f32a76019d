// The RPC value codec (rpc/value_codec.h): decode_value() and decode_args() on a message's meta, against
// a fixed list of message tensors (dense ones, and int64 indices for sparse tensors to name).
//
// Input byte 0: even decodes call arguments (decode_args), odd one value that must fill the meta
// (decode_value + expect_end); the rest is the meta. An accepted meta must survive a second round:
// encode(decoded) decodes again, and encodes to the same bytes (encoding normalises, e.g. a bool byte 2
// becomes 1 and tensor indices are renumbered, so the first re-encoding may differ from the input).
#include <cstdint>
#include <span>
#include <vector>

#include "fuzz/fuzz_support.h"
#include "rpc/value_codec.h"
#include "tensor/factory.h"

namespace {

namespace rpc = braid::rpc;
using braid::Tensor;

const std::vector<Tensor>& message_tensors() {
  static const std::vector<Tensor> tensors = {
      braid::from_vector<float>({1.f, 2.f, 3.f}, {3}),
      braid::from_vector<int64_t>({0, 1, 1, 0, 1, 2}, {2, 3}),  // sparse indices: 2 dims, 3 entries
      braid::from_vector<float>({4.f, 5.f, 6.f}, {3}),          // their values
      braid::from_vector<int64_t>({0, 3}, {1, 2}),             // 1 dim, 2 entries
      braid::from_vector<double>({}, {0}),
  };
  return tensors;
}

struct Encoded {
  std::vector<uint8_t> meta;
  std::vector<Tensor> tensors;
};

// Decodes `meta`; an args meta comes back as a list of [positional list, kwargs dict].
rpc::Value decode(std::span<const uint8_t> meta, const std::vector<Tensor>& tensors, bool args) {
  rpc::MetaReader r(meta);
  if (!args) {
    rpc::Value v = rpc::decode_value(r, tensors, nullptr);
    r.expect_end("the value");
    return v;
  }
  rpc::Args a = rpc::decode_args(r, tensors, nullptr);
  r.expect_end("the arguments");
  return rpc::Value(rpc::ValueList{rpc::Value(a.positional), rpc::Value(a.kwargs)});
}

// Encodes what decode() returned.
Encoded encode_decoded(const rpc::Value& v, bool args) {
  Encoded out;
  rpc::MetaWriter w(out.meta);
  if (args) {
    rpc::encode_args(rpc::Args(v.items()[0].items(), v.items()[1].as_dict()), w, out.tensors, nullptr);
  } else {
    rpc::encode_value(v, w, out.tensors, nullptr);
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const bool args = (data[0] & 1) == 0;
  const std::span<const uint8_t> meta(data + 1, size - 1);
  rpc::Value first;
  if (!braid::fuzz::accepts([&] { first = decode(meta, message_tensors(), args); })) return 0;
  const Encoded once = encode_decoded(first, args);
  rpc::Value second;
  if (!braid::fuzz::accepts([&] { second = decode(once.meta, once.tensors, args); })) {
    braid::fuzz::fail("fuzz_rpc_value", "a re-encoded value does not decode");
  }
  if (encode_decoded(second, args).meta != once.meta) {
    braid::fuzz::fail("fuzz_rpc_value", "encode/decode round trip differs");
  }
  return 0;
}
