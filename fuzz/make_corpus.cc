// Writes the seed inputs of every fuzz corpus (docs/FUZZING.md) with braid's own encoders, so that each
// target starts from valid frames and files rather than from nothing:
//
//   build/fuzz/fuzz_make_corpus fuzz/corpus        writes fuzz/corpus/<name>/seed-*, overwriting them
//
// Its output is committed. Each file starts with the mode byte its target reads first (see the top of
// each fuzz_<name>.cc); safetensors takes the file as it is. Regression inputs (regressions/) and inputs
// the fuzzer found are not written here.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "nn/safetensors.h"
#include "nn/serialize.h"
#include "rpc/ucx/ucx_envelope.h"
#include "rpc/value_bytes.h"
#include "rpc/value_codec.h"
#include "rpc/wire.h"
#include "store/tcp_store_request.h"
#include "tensor/factory.h"
#include "tensor/serialize.h"

namespace {

namespace fs = std::filesystem;
namespace rpc = braid::rpc;
namespace swire = braid::store::wire;
using braid::Tensor;
using Bytes = std::vector<uint8_t>;

class CorpusWriter {
 public:
  explicit CorpusWriter(fs::path root) : root_(std::move(root)) {}

  void write(const std::string& target, const std::string& name, uint8_t mode, const Bytes& body) {
    Bytes all{mode};
    all.insert(all.end(), body.begin(), body.end());
    write_raw(target, name, all);
  }
  void write_raw(const std::string& target, const std::string& name, const Bytes& bytes) {
    const fs::path dir = root_ / target;
    fs::create_directories(dir);
    std::ofstream out(dir / ("seed-" + name), std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (!out) throw std::runtime_error("cannot write " + (dir / name).string());
    ++count_;
  }
  int count() const { return count_; }

 private:
  fs::path root_;
  int count_ = 0;
};

Bytes text_bytes(const std::string& s) { return Bytes(s.begin(), s.end()); }

Bytes read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void store_frames(CorpusWriter& w) {
  using swire::Command;
  auto req = [&](const std::string& name, swire::Request r) { w.write("store_frames", name, 0, swire::encode_request(r)); };
  swire::Request r;
  r.command = Command::Set;
  r.key = "rank/3/addr";
  r.value = text_bytes("127.0.0.1:29500");
  req("set", r);
  r.command = Command::CompareSet;
  r.expected = text_bytes("old");
  req("compare_set", r);
  r = {};
  r.command = Command::Get;
  r.key = "k";
  req("get", r);
  r.command = Command::Delete;
  req("delete", r);
  r.command = Command::Add;
  r.delta = -7;
  req("add", r);
  r = {};
  r.keys = {"a", "bb", ""};
  for (auto c : {Command::Check, Command::Wait, Command::MultiGet}) {
    r.command = c;
    req(swire::command_name(static_cast<uint8_t>(c)), r);
  }
  r = {};
  r.command = Command::NumKeys;
  req("num_keys", r);
  r.command = Command::MultiSet;
  r.pairs = {{"x", text_bytes("1")}, {"y", {}}};
  req("multi_set", r);
  // Responses: the field-sequence byte, then the body. get: status, found flag (u8), value (bytes); an
  // error: status 1 and the message (bytes).
  swire::Writer get;
  get.u8(0);
  get.u8(1);
  get.bytes(text_bytes("value"));
  Bytes get_response{0b0100};
  get_response.insert(get_response.end(), get.buffer().begin(), get.buffer().end());
  w.write("store_frames", "response-get", 1, get_response);
  Bytes error_response{0b01};
  const Bytes error = swire::error_response("multi_get: some keys are missing");
  error_response.insert(error_response.end(), error.begin(), error.end());
  w.write("store_frames", "response-error", 1, error_response);
}

Bytes frame_of(const rpc::Message& msg) {
  Bytes out;
  rpc::frame_prefix(msg, out);
  for (auto span : rpc::payload_spans(msg)) out.insert(out.end(), span.begin(), span.end());
  return out;
}

void rpc_wire(CorpusWriter& w) {
  rpc::Message hello;
  hello.type = rpc::MessageType::kHello;
  hello.meta = {3, 0, 0, 0};
  w.write_raw("rpc_wire", "hello", frame_of(hello));
  rpc::Message call;
  call.type = rpc::MessageType::kCall;
  call.id = 42;
  call.tensors = {braid::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}), braid::from_vector<int64_t>({7}, {1}),
                  braid::empty({0, 4}, braid::DType::Float64)};
  call.requires_grad = {1, 0, 0};
  call.ext = {1, 2, 3, 4};
  call.meta = text_bytes("meta bytes");
  w.write_raw("rpc_wire", "call", frame_of(call));
  call.type = rpc::MessageType::kResult;
  call.tensors = {braid::scalar_tensor(2.5, braid::DType::Float32), braid::from_vector<uint8_t>({1, 0}, {2})};
  call.requires_grad.clear();
  call.ext.clear();
  w.write_raw("rpc_wire", "result", frame_of(call));
}

void rpc_value(CorpusWriter& w) {
  auto write = [&](const std::string& name, bool args, const std::vector<uint8_t>& meta) {
    w.write("rpc_value", name, args ? 0 : 1, meta);
  };
  {
    std::vector<uint8_t> meta;
    std::vector<Tensor> ts;
    rpc::MetaWriter mw(meta);
    rpc::Dict kw;
    kw.items.emplace_back("lr", rpc::Value(0.5));
    kw.items.emplace_back("name", rpc::Value(std::string("braid")));
    rpc::encode_args(rpc::Args(rpc::ValueList{rpc::Value(int64_t{3}), rpc::Value(true), rpc::Value(),
                                              rpc::Value(braid::from_vector<float>({1, 2, 3}, {3}))},
                               kw),
                     mw, ts, nullptr);
    write("args", true, meta);
  }
  {
    std::vector<uint8_t> meta;
    std::vector<Tensor> ts;
    rpc::MetaWriter mw(meta);
    rpc::ValueList nested{rpc::Value(rpc::Tuple{rpc::ValueList{rpc::Value(int64_t{-1}), rpc::Value(Tensor())}}),
                          rpc::Value(rpc::ValueList{rpc::Value(std::string(""))})};
    rpc::encode_value(rpc::Value(nested), mw, ts, nullptr);
    write("nested", false, meta);
  }
  {
    // A sparse tensor naming message tensors 1 (indices, int64 [2, 3]) and 2 (values, float [3]) of the
    // target's fixed list.
    std::vector<uint8_t> meta;
    rpc::MetaWriter mw(meta);
    mw.u8(100);
    mw.u8(2);
    mw.i64(2);
    mw.i64(3);
    mw.u8(0);
    mw.u32(1);
    mw.u32(2);
    write("sparse", false, meta);
  }
  {
    // An RRef's fork data: refused without an agent to decode it.
    std::vector<uint8_t> meta;
    rpc::MetaWriter mw(meta);
    mw.u8(static_cast<uint8_t>(rpc::Value::Kind::RRef));
    mw.i32(1);
    mw.id({1, 2});
    mw.id({1, 3});
    mw.i32(0);
    write("rref", false, meta);
  }
}

// Whole objects as the object collectives send them: the input is the bytes, no mode byte.
void object_bytes(CorpusWriter& w) {
  rpc::Dict d;
  d.set("n", rpc::Value(int64_t{3}));
  d.set("x", rpc::Value(0.25));
  d.set("s", rpc::Value(std::string("\0bytes", 6)));
  d.set("t", rpc::Value(braid::from_vector<float>({1.f, 2.f}, {2})));
  d.set("l", rpc::Value(rpc::ValueList{rpc::Value(), rpc::Value(true), rpc::Value(rpc::Tuple{})}));
  w.write_raw("object_bytes", "dict", rpc::value_to_bytes(rpc::Value(d)));
  w.write_raw("object_bytes", "int", rpc::value_to_bytes(rpc::Value(int64_t{-7})));
  w.write_raw("object_bytes", "empty-tensor", rpc::value_to_bytes(rpc::Value(braid::from_vector<double>({}, {0, 3}))));
}

void ucx_envelope(CorpusWriter& w) {
  namespace ucx = braid::rpc::ucx_detail;
  ucx::Envelope env;
  env.sender = 2;
  env.prefix_bytes = 96;
  env.stream = 0x1234567890abcdefULL;
  env.seq = 5;
  Bytes bytes(ucx::kEnvelopeBytes);
  ucx::encode_envelope(env, bytes.data());
  w.write_raw("ucx_envelope", "data-prefix", bytes);
  env.flags = ucx::kPrefixInHeader;
  ucx::encode_envelope(env, bytes.data());
  w.write_raw("ucx_envelope", "header-prefix", bytes);
  env.flags = 0;
  env.prefix_bytes = 0;
  ucx::encode_envelope(env, bytes.data());
  w.write_raw("ucx_envelope", "reset", bytes);
}

void job_yaml(CorpusWriter& w) {
  w.write("job_yaml", "fsdp", 0, text_bytes(R"(name: fsdp
backend: gloo
roles: {trainers: 4}
model:
  kind: mlp
  args: {in: 32, hidden: [256, 256, 256], out: 8}
  init_seed: 3
loss: cross_entropy
data: {kind: synthetic, num_samples: 4096, num_features: 32, num_classes: 8, seed: 5}
optimizer: {kind: adam, lr: 0.001}
ddp: {mode: none}
fsdp:
  enabled: true
  sharding_strategy: full_shard
  wrap: ["0", "2", "4", "6"]
train: {epochs: 3, batch_size: 32, seed: 0}
log: {interval: 20}
)"));
  w.write("job_yaml", "hybrid", 0, text_bytes(R"(name: hybrid
backend: gloo
roles: {trainers: [0, 1, 2, 3], workers: [4], master: 5}
model: {kind: mlp, args: {in: 8, hidden: [16], out: 2}, init_seed: 1}
loss: cross_entropy
data: {kind: synthetic, num_samples: 64, num_features: 8, num_classes: 2, seed: 1}
optimizer: {kind: sgd, lr: 0.05, momentum: 0.9}
ddp: {mode: outside}
train: {epochs: 2, batch_size: 4, seed: 0}
checkpoint: {dir: ckpt, interval: 10}
failure: {timeout_s: 30}
log: {interval: 5, metrics: metrics.jsonl}
)"));
  w.write("job_yaml", "anchors", 0, text_bytes("name: &n x\nbackend: gloo\nroles: {trainers: [0]}\nalias: *n\n"));
  w.write("job_yaml", "set-lr", 1, text_bytes("optimizer.lr=0.5"));
  w.write("job_yaml", "set-trainers", 1, text_bytes("roles.trainers=[1]"));
  w.write("job_yaml", "set-hidden", 1, text_bytes("model.args.hidden=[4, 4]"));
  w.write("job_yaml", "set-timeout", 1, text_bytes("failure.timeout_s=1e10"));
}

Bytes npy_file(int major, const std::string& dict, const Bytes& data) {
  std::string header = dict;
  const size_t preamble = major == 1 ? 10 : 12;
  while ((preamble + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  Bytes out = text_bytes("\x93NUMPY");
  out.push_back(static_cast<uint8_t>(major));
  out.push_back(0);
  const auto n = static_cast<uint32_t>(header.size());
  for (size_t i = 0; i < (major == 1 ? 2u : 4u); ++i) out.push_back(static_cast<uint8_t>(n >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

void npy(CorpusWriter& w) {
  const std::string f4 = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  w.write("npy", "header", 0, text_bytes(f4));
  w.write("npy", "header-scalar", 0, text_bytes("{\"descr\": \"|u1\", \"fortran_order\": True, \"shape\": ()}"));
  w.write("npy", "header-1tuple", 0, text_bytes("{'shape': (5,), 'fortran_order': False, 'descr': '<i8'}"));
  w.write("npy", "file-v1", 1, npy_file(1, f4, Bytes(24, 1)));
  w.write("npy", "file-v2", 1, npy_file(2, "{'descr': '<i4', 'fortran_order': False, 'shape': (4,), }", Bytes(16, 2)));
  w.write("npy", "file-v3-empty", 1, npy_file(3, "{'descr': '<f8', 'fortran_order': False, 'shape': (0, 7), }", {}));
}

void state_dict(CorpusWriter& w, const fs::path& tmp) {
  const braid::nn::StateDict state = {
      {"0.weight", braid::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3})},
      {"0.bias", braid::from_vector<double>({0.5, -0.5}, {2})},
      {"steps", braid::scalar_tensor(12, braid::DType::Int64)},
      {"mask", braid::from_vector<uint8_t>({1, 0, 1}, {3})},
      {"empty", braid::empty({0, 3}, braid::DType::Int32)},
  };
  const fs::path brsd = tmp / "seed.brsd";
  braid::nn::save_state_dict(state, brsd.string());
  w.write("state_dict", "state-dict", 0, read_all(brsd));
  w.write("state_dict", "state-dict-fix", 1, read_all(brsd));
  w.write("state_dict", "tensor", 2, braid::serialize(state[0].second));
  w.write("state_dict", "tensor-scalar-fix", 3, braid::serialize(state[2].second));
  const fs::path st = tmp / "seed.safetensors";
  braid::nn::save_safetensors(state, st.string(), {{"format", "pt"}});
  w.write_raw("safetensors", "state", read_all(st));
  braid::nn::save_safetensors({{"w", braid::from_vector<float>({1, 2}, {2})}}, st.string());
  w.write_raw("safetensors", "one", read_all(st));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_ROOT (fuzz/corpus)\n", argv[0]);
    return 2;
  }
  CorpusWriter w{fs::path(argv[1])};
  const fs::path tmp = fs::temp_directory_path() / ("braid-fuzz-corpus-" + std::to_string(::getpid()));
  fs::create_directories(tmp);
  store_frames(w);
  rpc_wire(w);
  rpc_value(w);
  object_bytes(w);
  ucx_envelope(w);
  job_yaml(w);
  npy(w);
  state_dict(w, tmp);
  fs::remove_all(tmp);
  std::printf("wrote %d seed inputs under %s\n", w.count(), argv[1]);
  return 0;
}
