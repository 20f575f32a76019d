#include "rpc/value.h"

#include <fmt/format.h>

#include "base/check.h"
#include "tensor/dtype.h"

namespace braid::rpc {

Value Object::to_value() const {
  BRAID_THROW(InvalidArgument, "an object of class '{}' cannot be sent to another worker: its class gives no "
              "to_value() form (keep it behind an RRef and call its methods remotely)", type_name());
}

const Value* Dict::find(const std::string& key) const {
  for (const auto& [k, v] : items) {
    if (k == key) return &v;
  }
  return nullptr;
}

void Dict::set(std::string key, Value value) {
  for (auto& [k, v] : items) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  items.emplace_back(std::move(key), std::move(value));
}

std::string_view kind_name(Value::Kind kind) {
  switch (kind) {
    case Value::Kind::None: return "none";
    case Value::Kind::Bool: return "bool";
    case Value::Kind::Int: return "int";
    case Value::Kind::Double: return "double";
    case Value::Kind::String: return "string";
    case Value::Kind::Tensor: return "tensor";
    case Value::Kind::List: return "list";
    case Value::Kind::Tuple: return "tuple";
    case Value::Kind::Dict: return "dict";
    case Value::Kind::RRef: return "rref";
    case Value::Kind::Object: return "object";
  }
  return "unknown";
}

namespace {

[[noreturn]] void wrong_kind(Value::Kind expected, const Value& v) {
  BRAID_THROW(InvalidArgument, "rpc value: expected {}, got {}", kind_name(expected), v.describe());
}

}  // namespace

#define BRAID_VALUE_GET(Kind_, Type_)                                       \
  do {                                                                      \
    if (const auto* p = std::get_if<Type_>(&v_)) return *p;                 \
    wrong_kind(Kind::Kind_, *this);                                         \
  } while (0)

bool Value::as_bool() const { BRAID_VALUE_GET(Bool, bool); }
int64_t Value::as_int() const { BRAID_VALUE_GET(Int, int64_t); }
double Value::as_double() const {
  if (const auto* i = std::get_if<int64_t>(&v_)) return static_cast<double>(*i);
  BRAID_VALUE_GET(Double, double);
}
const std::string& Value::as_string() const { BRAID_VALUE_GET(String, std::string); }
const Tensor& Value::as_tensor() const { BRAID_VALUE_GET(Tensor, Tensor); }
const ValueList& Value::as_list() const { BRAID_VALUE_GET(List, ValueList); }
const ValueList& Value::as_tuple() const {
  if (const auto* t = std::get_if<Tuple>(&v_)) return t->items;
  wrong_kind(Kind::Tuple, *this);
}
const ValueList& Value::items() const {
  if (const auto* t = std::get_if<Tuple>(&v_)) return t->items;
  if (const auto* l = std::get_if<ValueList>(&v_)) return *l;
  BRAID_THROW(InvalidArgument, "rpc value: expected a list or a tuple, got {}", describe());
}
const Dict& Value::as_dict() const { BRAID_VALUE_GET(Dict, Dict); }
const RRef& Value::as_rref() const { BRAID_VALUE_GET(RRef, RRef); }
const std::shared_ptr<Object>& Value::as_object() const { BRAID_VALUE_GET(Object, std::shared_ptr<Object>); }

#undef BRAID_VALUE_GET

std::string Value::describe() const {
  switch (kind()) {
    case Kind::None: return "none";
    case Kind::Bool: return fmt::format("bool {}", as_bool());
    case Kind::Int: return fmt::format("int {}", as_int());
    case Kind::Double: return fmt::format("double {}", std::get<double>(v_));
    case Kind::String: return fmt::format("string of {} bytes", as_string().size());
    case Kind::Tensor: {
      const Tensor& t = as_tensor();
      if (!t.defined()) return "undefined tensor";
      return fmt::format("tensor {} [{}]", dtype_name(t.dtype()), fmt::join(t.shape(), ", "));
    }
    case Kind::List: return fmt::format("list of {}", as_list().size());
    case Kind::Tuple: return fmt::format("tuple of {}", as_tuple().size());
    case Kind::Dict: return fmt::format("dict of {}", as_dict().items.size());
    case Kind::RRef: return as_rref().defined() ? as_rref().describe() : "null rref";
    case Kind::Object: return as_object() ? fmt::format("object {}", as_object()->type_name()) : "null object";
  }
  return "unknown";
}

const Value& Args::at(size_t i) const {
  BRAID_CHECK_ARG(i < positional.size(), "rpc call: argument {} requested but {} positional argument(s) given", i,
                  positional.size());
  return positional[i];
}

const Value& Args::kwarg(const std::string& key, const Value& fallback) const {
  const Value* v = kwargs.find(key);
  return v != nullptr ? *v : fallback;
}

}  // namespace braid::rpc
