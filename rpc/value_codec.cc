#include "rpc/value_codec.h"

#include <cstring>
#include <limits>

#include "base/check.h"
#include "tensor/sparse.h"

namespace braid::rpc {

namespace {

constexpr uint32_t kUndefinedTensor = std::numeric_limits<uint32_t>::max();
// Kinds beyond Value::Kind that exist only on the wire.
constexpr uint8_t kSparseTensorTag = 100;

// Where encoding puts tensors: the message's, and (when asked for) the caller's tensor each came from.
struct TensorsOut {
  std::vector<Tensor>& tensors;
  std::vector<Tensor>* sources;
};

uint32_t add_tensor(const Tensor& t, TensorsOut& out, bool user_tensor) {
  BRAID_CHECK_ARG(out.tensors.size() < kUndefinedTensor, "rpc: too many tensors in one message ({})",
                  out.tensors.size());
  Tensor dense = t.is_cuda() ? t.cpu() : t;
  out.tensors.push_back(dense.contiguous());
  if (out.sources != nullptr) {
    out.sources->resize(out.tensors.size() - 1);
    out.sources->push_back(user_tensor ? t : Tensor());
  }
  return static_cast<uint32_t>(out.tensors.size() - 1);
}

const Tensor& tensor_at(const std::vector<Tensor>& msg_tensors, uint32_t index) {
  BRAID_CHECK_TYPED(WireError, index < msg_tensors.size(),
                    "rpc meta: tensor index {} out of range (message has {} tensors)", index, msg_tensors.size());
  return msg_tensors[index];
}

void encode_rec(const Value& v, MetaWriter& w, TensorsOut& ts, const RRefEncoder* rrefs, int depth) {
  BRAID_CHECK_ARG(depth < kMaxValueDepth, "rpc: value nested deeper than {} levels cannot be sent", kMaxValueDepth);
  using K = Value::Kind;
  if (v.kind() == K::Object) {
    BRAID_CHECK_ARG(v.as_object() != nullptr, "rpc: a null object cannot be sent");
    encode_rec(v.as_object()->to_value(), w, ts, rrefs, depth + 1);
    return;
  }
  if (v.kind() == K::Tensor && v.as_tensor().defined() && v.as_tensor().is_sparse()) {
    const SparseTensor& sp = v.as_tensor().sparse();
    w.u8(kSparseTensorTag);
    w.u8(static_cast<uint8_t>(sp.shape().size()));
    for (int64_t s : sp.shape()) w.i64(s);
    w.u8(sp.is_coalesced() ? 1 : 0);
    w.u32(add_tensor(sp.indices(), ts, false));
    w.u32(add_tensor(sp.values(), ts, false));
    return;
  }
  w.u8(static_cast<uint8_t>(v.kind()));
  switch (v.kind()) {
    case K::None: break;
    case K::Bool: w.u8(v.as_bool() ? 1 : 0); break;
    case K::Int: w.i64(v.as_int()); break;
    case K::Double: w.f64(v.as_double()); break;
    case K::String: w.str(v.as_string()); break;
    case K::Tensor: w.u32(v.as_tensor().defined() ? add_tensor(v.as_tensor(), ts, true) : kUndefinedTensor); break;
    case K::List:
    case K::Tuple: {
      const ValueList& items = v.items();
      w.u32(static_cast<uint32_t>(items.size()));
      for (const auto& item : items) encode_rec(item, w, ts, rrefs, depth + 1);
      break;
    }
    case K::Dict: {
      const Dict& d = v.as_dict();
      w.u32(static_cast<uint32_t>(d.items.size()));
      for (const auto& [key, item] : d.items) {
        w.str(key);
        encode_rec(item, w, ts, rrefs, depth + 1);
      }
      break;
    }
    case K::RRef: {
      BRAID_CHECK_ARG(v.as_rref().defined(), "rpc: a null RRef cannot be sent");
      BRAID_CHECK_ARG(rrefs != nullptr, "rpc: an RRef can only be sent through a running RPC agent");
      const RRefForkData fd = (*rrefs)(v.as_rref());
      w.i32(fd.owner);
      w.id(fd.rref_id);
      w.id(fd.fork_id);
      w.i32(fd.parent);
      break;
    }
    case K::Object: break;  // handled above
  }
}

Value decode_rec(MetaReader& r, const std::vector<Tensor>& ts, const RRefDecoder* rrefs, int depth) {
  BRAID_CHECK_TYPED(WireError, depth < kMaxValueDepth, "rpc meta: value nested deeper than {} levels",
                    kMaxValueDepth);
  const uint8_t tag = r.u8("value kind");
  if (tag == kSparseTensorTag) {
    const uint8_t ndim = r.u8("sparse ndim");
    BRAID_CHECK_TYPED(WireError, ndim <= kMaxTensorDims, "rpc meta: sparse tensor of {} dims", ndim);
    Shape shape(ndim);
    for (auto& s : shape) s = r.i64("sparse size");
    const bool coalesced = r.u8("sparse coalesced") != 0;
    const Tensor& indices = tensor_at(ts, r.u32("sparse indices index"));
    const Tensor& values = tensor_at(ts, r.u32("sparse values index"));
    try {
      return Value(SparseTensor(indices, values, shape, coalesced).to_tensor());
    } catch (const InvalidArgument& e) {
      BRAID_THROW(WireError, "rpc meta: malformed sparse tensor: {}", e.what());
    }
  }
  using K = Value::Kind;
  BRAID_CHECK_TYPED(WireError, tag <= static_cast<uint8_t>(K::RRef) && tag != static_cast<uint8_t>(K::Object),
                    "rpc meta: unknown value kind {}", tag);
  switch (static_cast<K>(tag)) {
    case K::None: return Value();
    case K::Bool: return Value(r.u8("bool") != 0);
    case K::Int: return Value(r.i64("int"));
    case K::Double: return Value(r.f64("double"));
    case K::String: return Value(r.str("string"));
    case K::Tensor: {
      const uint32_t index = r.u32("tensor index");
      if (index == kUndefinedTensor) return Value(Tensor());
      return Value(tensor_at(ts, index));
    }
    case K::List:
    case K::Tuple: {
      const uint32_t n = r.u32("list length");
      // Each item needs at least one byte: a count beyond the bytes left is malformed, not a huge allocation.
      BRAID_CHECK_TYPED(WireError, n <= r.left(), "rpc meta: list of {} items in {} bytes", n, r.left());
      ValueList items;
      items.reserve(n);
      for (uint32_t i = 0; i < n; ++i) items.push_back(decode_rec(r, ts, rrefs, depth + 1));
      if (static_cast<K>(tag) == K::Tuple) return Value(Tuple{std::move(items)});
      return Value(std::move(items));
    }
    case K::Dict: {
      const uint32_t n = r.u32("dict length");
      BRAID_CHECK_TYPED(WireError, n <= r.left(), "rpc meta: dict of {} items in {} bytes", n, r.left());
      Dict d;
      d.items.reserve(n);
      for (uint32_t i = 0; i < n; ++i) {
        std::string key = r.str("dict key");
        d.items.emplace_back(std::move(key), decode_rec(r, ts, rrefs, depth + 1));
      }
      return Value(std::move(d));
    }
    case K::RRef: {
      RRefForkData fd;
      fd.owner = r.i32("rref owner");
      fd.rref_id = r.id("rref id");
      fd.fork_id = r.id("rref fork id");
      fd.parent = r.i32("rref parent");
      BRAID_CHECK_TYPED(WireError, rrefs != nullptr, "rpc meta: an RRef arrived where none can be decoded");
      return Value((*rrefs)(fd));
    }
    case K::Object: break;
  }
  BRAID_THROW(WireError, "rpc meta: unknown value kind {}", tag);
}

}  // namespace

void MetaWriter::raw(const void* p, size_t n) {
  const size_t at = out_.size();
  out_.resize(at + n);
  std::memcpy(out_.data() + at, p, n);
}

void MetaWriter::str(const std::string& s) {
  BRAID_CHECK_ARG(s.size() <= std::numeric_limits<uint32_t>::max(), "rpc: string of {} bytes is too long", s.size());
  u32(static_cast<uint32_t>(s.size()));
  raw(s.data(), s.size());
}

void MetaReader::raw(void* p, size_t n, const char* what) {
  BRAID_CHECK_TYPED(WireError, left() >= n, "rpc meta: truncated reading {} ({} bytes needed, {} left)", what, n,
                    left());
  std::memcpy(p, bytes_.data() + at_, n);
  at_ += n;
}

#define BRAID_META_READ(Type_, name_)      \
  Type_ MetaReader::name_(const char* what) { \
    Type_ v;                                \
    raw(&v, sizeof v, what);                \
    return v;                               \
  }
BRAID_META_READ(uint8_t, u8)
BRAID_META_READ(uint32_t, u32)
BRAID_META_READ(int32_t, i32)
BRAID_META_READ(uint64_t, u64)
BRAID_META_READ(int64_t, i64)
BRAID_META_READ(double, f64)
#undef BRAID_META_READ

std::string MetaReader::str(const char* what) {
  const uint32_t n = u32(what);
  BRAID_CHECK_TYPED(WireError, left() >= n, "rpc meta: {} of {} bytes but only {} left", what, n, left());
  std::string s(reinterpret_cast<const char*>(bytes_.data() + at_), n);
  at_ += n;
  return s;
}

GloballyUniqueId MetaReader::id(const char* what) {
  GloballyUniqueId g;
  g.creator = i32(what);
  g.local_id = u64(what);
  return g;
}

void MetaReader::expect_end(const char* what) const {
  BRAID_CHECK_TYPED(WireError, left() == 0, "rpc meta: {} trailing bytes after {}", left(), what);
}

void encode_value(const Value& value, MetaWriter& meta, std::vector<Tensor>& msg_tensors, const RRefEncoder* rrefs,
                  std::vector<Tensor>* sources) {
  TensorsOut out{msg_tensors, sources};
  encode_rec(value, meta, out, rrefs, 0);
  if (sources != nullptr) sources->resize(msg_tensors.size());
}

Value decode_value(MetaReader& meta, const std::vector<Tensor>& msg_tensors, const RRefDecoder* rrefs) {
  return decode_rec(meta, msg_tensors, rrefs, 0);
}

void encode_args(const Args& args, MetaWriter& meta, std::vector<Tensor>& msg_tensors, const RRefEncoder* rrefs,
                 std::vector<Tensor>* sources) {
  encode_value(Value(args.positional), meta, msg_tensors, rrefs, sources);
  encode_value(Value(args.kwargs), meta, msg_tensors, rrefs, sources);
}

Args decode_args(MetaReader& meta, const std::vector<Tensor>& msg_tensors, const RRefDecoder* rrefs) {
  Value positional = decode_value(meta, msg_tensors, rrefs);
  Value kwargs = decode_value(meta, msg_tensors, rrefs);
  BRAID_CHECK_TYPED(WireError, positional.is(Value::Kind::List) && kwargs.is(Value::Kind::Dict),
                    "rpc meta: call arguments must be a list and a dict, got {} and {}", positional.describe(),
                    kwargs.describe());
  return Args(positional.as_list(), kwargs.as_dict());
}

}  // namespace braid::rpc
