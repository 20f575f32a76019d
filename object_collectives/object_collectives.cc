#include "object_collectives/object_collectives.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <span>
#include <string>

#include "base/check.h"
#include "base/env.h"
#include "rpc/value_bytes.h"
#include "tensor/factory.h"

namespace braid::collectives {
namespace {

constexpr uint64_t kDefaultMaxBytes = uint64_t{1} << 30;

// One call: its name, group and options, and the rank translations its messages need.
struct ObjectCall {
  const char* op;
  GroupPtr pg;
  bool explicit_group;
  uint64_t max_bytes;
  Device device;

  int group_rank(int global) const { return explicit_group ? get_group_rank(pg, global) : global; }
  int global_rank(int group) const { return explicit_group ? get_global_rank(pg, group) : group; }

  std::vector<uint8_t> encode(size_t index, const Value& value) const {
    try {
      return rpc::value_to_bytes(value);
    } catch (const Error& e) {
      BRAID_THROW(InvalidArgument, "{}: object {} cannot travel as an object: {}", op, index, e.what());
    }
  }

  Value decode(size_t index, int from_group_rank, std::span<const uint8_t> bytes) const {
    rpc::WireLimits limits;
    limits.max_payload_bytes = max_bytes;
    try {
      return rpc::value_from_bytes(bytes, limits);
    } catch (const Error& e) {
      BRAID_THROW(InvalidArgument, "{} on group '{}': object {} from rank {} is malformed: {}", op, pg->name(), index,
                  global_rank(from_group_rank), e.what());
    }
  }

  // Sizes a rank announced, checked before any buffer of that size exists.
  void check_sizes(int from_group_rank, std::span<const int64_t> sizes) const {
    uint64_t total = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      const bool fits = sizes[i] >= 0 && static_cast<uint64_t>(sizes[i]) <= max_bytes - total;
      BRAID_CHECK_ARG(fits,
                      "{} on group '{}': rank {} announced {} bytes for object {}, over the limit of {} bytes per call "
                      "(ObjectOptions::max_bytes, BRAID_OBJECT_MAX_BYTES)",
                      op, pg->name(), global_rank(from_group_rank), sizes[i], i, max_bytes);
      total += static_cast<uint64_t>(sizes[i]);
    }
  }

  // A list of objects as one byte string and each object's size (broadcast and send carry lists).
  std::vector<uint8_t> encode_list(const std::vector<Value>& objects, std::vector<int64_t>& sizes) const {
    std::vector<uint8_t> all;
    sizes.assign(objects.size(), 0);
    for (size_t i = 0; i < objects.size(); ++i) {
      const std::vector<uint8_t> b = encode(i, objects[i]);
      sizes[i] = static_cast<int64_t>(b.size());
      all.insert(all.end(), b.begin(), b.end());
    }
    return all;
  }

  // The inverse, from rank `from_group_rank`'s bytes; `sizes` were checked against the limit.
  void decode_list(int from_group_rank, const std::vector<uint8_t>& all, const std::vector<int64_t>& sizes,
                   std::vector<Value>& objects) const {
    size_t at = 0;
    for (size_t i = 0; i < objects.size(); ++i) {
      objects[i] = decode(i, from_group_rank, std::span<const uint8_t>(all).subspan(at, static_cast<size_t>(sizes[i])));
      at += static_cast<size_t>(sizes[i]);
    }
  }

  Tensor sizes_tensor(const std::vector<int64_t>& sizes) const {
    return from_vector(sizes, {static_cast<int64_t>(sizes.size())}).to(device);
  }
  Tensor bytes_tensor(int64_t n) const { return zeros({n}, TensorOptions(DType::UInt8, device)); }
};

uint64_t max_bytes_of(const ObjectOptions& options) {
  if (options.max_bytes > 0) return options.max_bytes;
  static const uint64_t from_env = [] {
    const auto text = env::get("BRAID_OBJECT_MAX_BYTES");
    if (!text || text->empty()) return kDefaultMaxBytes;
    const int64_t v = env::parse_size(*text, "BRAID_OBJECT_MAX_BYTES");
    BRAID_CHECK_ARG(v > 0, "BRAID_OBJECT_MAX_BYTES={} must be a positive size", *text);
    return static_cast<uint64_t>(v);
  }();
  return from_env;
}

std::optional<ObjectCall> start(const char* op, const GroupArg& group, const ObjectOptions& options) {
  GroupPtr pg = group_for_op(group, op);
  if (!pg) return std::nullopt;
  BRAID_CHECK_ARG(pg->backend_name() != "nccl" || options.device.is_cuda(),
                  "{} on group '{}': an nccl group moves only CUDA memory; pass ObjectOptions::device = cuda:N", op,
                  pg->name());
  return ObjectCall{op, pg, group.has_value(), max_bytes_of(options), options.device};
}

std::vector<int64_t> host_ints(const Tensor& t) { return to_vector<int64_t>(t); }

std::vector<uint8_t> host_bytes(const Tensor& t) { return to_vector<uint8_t>(t); }

void wait(const std::shared_ptr<Work>& work) { work->wait(); }

}  // namespace

void broadcast_object_list(std::vector<Value>& objects, int src, const GroupArg& group, const ObjectOptions& options) {
  const auto call = start("broadcast_object_list", group, options);
  if (!call) return;
  const int root = call->group_rank(src);
  const bool is_src = call->pg->rank() == root;
  std::vector<int64_t> sizes(objects.size(), 0);
  const std::vector<uint8_t> all = is_src ? call->encode_list(objects, sizes) : std::vector<uint8_t>();
  BroadcastOptions o;
  o.root_rank = root;
  TensorList size_list{call->sizes_tensor(sizes)};
  wait(call->pg->broadcast(size_list, o));
  sizes = host_ints(size_list[0]);
  if (!is_src) call->check_sizes(root, sizes);
  int64_t total = 0;
  for (int64_t s : sizes) total += s;
  TensorList data{is_src ? from_vector(all, {total}).to(call->device) : call->bytes_tensor(total)};
  wait(call->pg->broadcast(data, o));
  if (!is_src) call->decode_list(root, host_bytes(data[0]), sizes, objects);
}

namespace {

// Every rank's one object's size, allgathered and checked; the padded size every buffer takes.
std::vector<int64_t> allgather_sizes(const ObjectCall& call, int64_t mine) {
  const int ws = call.pg->size();
  std::vector<TensorList> outs(1);
  for (int r = 0; r < ws; ++r) outs[0].push_back(call.sizes_tensor({0}));
  TensorList in{call.sizes_tensor({mine})};
  wait(call.pg->allgather(outs, in));
  std::vector<int64_t> sizes;
  for (int r = 0; r < ws; ++r) {
    sizes.push_back(host_ints(outs[0][static_cast<size_t>(r)])[0]);
    call.check_sizes(r, std::span<const int64_t>(&sizes.back(), 1));
  }
  return sizes;
}

Tensor padded(const ObjectCall& call, const std::vector<uint8_t>& bytes, int64_t length) {
  std::vector<uint8_t> p(static_cast<size_t>(length), 0);
  std::copy(bytes.begin(), bytes.end(), p.begin());
  return from_vector(p, {length}).to(call.device);
}

}  // namespace

void all_gather_object(std::vector<Value>& objects, const Value& object, const GroupArg& group,
                       const ObjectOptions& options) {
  const auto call = start("all_gather_object", group, options);
  if (!call) return;
  const int ws = call->pg->size();
  BRAID_CHECK_ARG(objects.size() == static_cast<size_t>(ws),
                  "all_gather_object on group '{}': object_list must have one entry per rank ({}), got {}",
                  call->pg->name(), ws, objects.size());
  const std::vector<uint8_t> mine = call->encode(0, object);
  const std::vector<int64_t> sizes = allgather_sizes(*call, static_cast<int64_t>(mine.size()));
  const int64_t width = *std::max_element(sizes.begin(), sizes.end());
  Tensor in = padded(*call, mine, width);
  Tensor out = call->bytes_tensor(width * ws);
  wait(call->pg->allgather_into_tensor(out, in));
  const std::vector<uint8_t> got = host_bytes(out);
  for (int r = 0; r < ws; ++r) {
    const auto piece = std::span<const uint8_t>(got).subspan(static_cast<size_t>(r * width),
                                                             static_cast<size_t>(sizes[static_cast<size_t>(r)]));
    objects[static_cast<size_t>(r)] = call->decode(0, r, piece);
  }
}

void gather_object(const Value& object, std::vector<Value>* gathered, int dst, const GroupArg& group,
                   const ObjectOptions& options) {
  const auto call = start("gather_object", group, options);
  if (!call) return;
  const int ws = call->pg->size();
  const int root = call->group_rank(dst);
  const bool is_dst = call->pg->rank() == root;
  BRAID_CHECK_ARG(!is_dst || gathered != nullptr, "gather_object: Must specify object_gather_list on dst rank");
  BRAID_CHECK_ARG(!is_dst || gathered->size() == static_cast<size_t>(ws),
                  "gather_object on group '{}': object_gather_list must have one entry per rank ({}), got {}",
                  call->pg->name(), ws, gathered == nullptr ? 0 : gathered->size());
  const std::vector<uint8_t> mine = call->encode(0, object);
  const std::vector<int64_t> sizes = allgather_sizes(*call, static_cast<int64_t>(mine.size()));
  const int64_t width = *std::max_element(sizes.begin(), sizes.end());
  TensorList in{padded(*call, mine, width)};
  std::vector<TensorList> outs;
  if (is_dst) {
    outs.emplace_back();
    for (int r = 0; r < ws; ++r) outs[0].push_back(call->bytes_tensor(width));
  }
  GatherOptions o;
  o.root_rank = root;
  wait(call->pg->gather(outs, in, o));
  if (!is_dst) return;
  for (int r = 0; r < ws; ++r) {
    const std::vector<uint8_t> got = host_bytes(outs[0][static_cast<size_t>(r)]);
    (*gathered)[static_cast<size_t>(r)] =
        call->decode(0, r, std::span<const uint8_t>(got).first(static_cast<size_t>(sizes[static_cast<size_t>(r)])));
  }
}

void scatter_object_list(std::vector<Value>& output, const std::vector<Value>& inputs, int src, const GroupArg& group,
                         const ObjectOptions& options) {
  const auto call = start("scatter_object_list", group, options);
  if (!call) return;
  BRAID_CHECK_ARG(!output.empty(),
                  "scatter_object_list: Expected argument scatter_object_output_list to be a list of size at least 1.");
  const int ws = call->pg->size();
  const int root = call->group_rank(src);
  const bool is_src = call->pg->rank() == root;
  BRAID_CHECK_ARG(!is_src || inputs.size() == static_cast<size_t>(ws),
                  "scatter_object_list on group '{}': the source needs one input object per rank ({}), got {}",
                  call->pg->name(), ws, inputs.size());
  std::vector<std::vector<uint8_t>> encoded;
  int64_t width = 0;
  if (is_src) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      encoded.push_back(call->encode(i, inputs[i]));
      width = std::max(width, static_cast<int64_t>(encoded.back().size()));
    }
  }
  // The padded width from the source, then each rank's size and bytes.
  BroadcastOptions bo;
  bo.root_rank = root;
  TensorList width_list{call->sizes_tensor({width})};
  wait(call->pg->broadcast(width_list, bo));
  width = host_ints(width_list[0])[0];
  if (!is_src) call->check_sizes(root, std::span<const int64_t>(&width, 1));
  ScatterOptions so;
  so.root_rank = root;
  std::vector<TensorList> size_in, data_in;
  if (is_src) {
    size_in.emplace_back();
    data_in.emplace_back();
    for (const auto& b : encoded) {
      size_in[0].push_back(call->sizes_tensor({static_cast<int64_t>(b.size())}));
      data_in[0].push_back(padded(*call, b, width));
    }
  }
  TensorList size_out{call->sizes_tensor({0})};
  TensorList data_out{call->bytes_tensor(width)};
  wait(call->pg->scatter(size_out, size_in, so));
  wait(call->pg->scatter(data_out, data_in, so));
  const int64_t size = host_ints(size_out[0])[0];
  BRAID_CHECK_ARG(size >= 0 && size <= width,
                  "scatter_object_list on group '{}': rank {} sent a size {} beyond its {} bytes", call->pg->name(),
                  src, size, width);
  const std::vector<uint8_t> got = host_bytes(data_out[0]);
  output[0] = call->decode(static_cast<size_t>(call->pg->rank()), root,
                           std::span<const uint8_t>(got).first(static_cast<size_t>(size)));
}

void send_object_list(const std::vector<Value>& objects, int dst, const GroupArg& group, const ObjectOptions& options) {
  const auto call = start("send_object_list", group, options);
  if (!call) return;
  BRAID_CHECK_ARG(!objects.empty(), "send_object_list on group '{}': object_list must not be empty", call->pg->name());
  std::vector<int64_t> sizes;
  const std::vector<uint8_t> all = call->encode_list(objects, sizes);
  const int peer = call->group_rank(dst);
  TensorList size_list{call->sizes_tensor(sizes)};
  TensorList data{from_vector(all, {static_cast<int64_t>(all.size())}).to(call->device)};
  // Both posted before either is waited for: the receiver takes them in this order.
  auto first = call->pg->send(size_list, peer, 0);
  auto second = call->pg->send(data, peer, 0);
  wait(first);
  wait(second);
}

int recv_object_list(std::vector<Value>& objects, int src, const GroupArg& group, const ObjectOptions& options) {
  const auto call = start("recv_object_list", group, options);
  if (!call) return -1;
  BRAID_CHECK_ARG(!objects.empty(), "recv_object_list on group '{}': object_list must not be empty (its length is the "
                  "number of objects expected)", call->pg->name());
  TensorList size_list{call->sizes_tensor(std::vector<int64_t>(objects.size(), 0))};
  auto work = src < 0 ? call->pg->recv_anysource(size_list, 0) : call->pg->recv(size_list, call->group_rank(src), 0);
  wait(work);
  const int from = src < 0 ? work->source_rank() : call->group_rank(src);
  const std::vector<int64_t> sizes = host_ints(size_list[0]);
  call->check_sizes(from, sizes);
  int64_t total = 0;
  for (int64_t s : sizes) total += s;
  TensorList data{call->bytes_tensor(total)};
  wait(call->pg->recv(data, from, 0));
  call->decode_list(from, host_bytes(data[0]), sizes, objects);
  return call->global_rank(from);
}

}  // namespace braid::collectives
