// Value: what RPC arguments and results are made of — none, bool, int, double, string, Tensor, list,
// tuple, string-keyed dict, RRef, and (never on the wire) a local Object.
//
// A Value is a small tree with value semantics for scalars and shared handles for tensors, RRefs and
// objects (copying a Value copies the tree, not tensor data). Lists and tuples differ only in name (as
// Python's), so that a callee can tell `(a, b)` from `[a, b]`. Dicts keep insertion order.
//
// Object is how a worker keeps values that are not data — a registered class's instance behind an RRef
// (rpc/registry.h). Objects never cross the wire; encoding one is an error naming its type, unless its
// class gives a to_value() form (e.g. a module's state), which is sent instead.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "rpc/rref.h"
#include "tensor/tensor.h"

namespace braid::rpc {

class Value;
struct ClassEntry;

// A local, non-data value: a registered class's instance. Subclassed by ObjectHolder<T> (registry.h).
class Object {
 public:
  virtual ~Object() = default;
  virtual const std::string& type_name() const = 0;
  // The form sent when this object is copied to another worker (to_here, a result); throws by default.
  virtual Value to_value() const;
  // The registered class (methods by name); nullptr for objects made outside the registry.
  virtual const ClassEntry* class_entry() const { return nullptr; }
};

using None = std::monostate;
using ValueList = std::vector<Value>;
struct Tuple {
  ValueList items;
};
// A string-keyed dict that keeps insertion order (small: linear lookup).
struct Dict {
  std::vector<std::pair<std::string, Value>> items;
  const Value* find(const std::string& key) const;
  void set(std::string key, Value value);
};

class Value {
 public:
  enum class Kind : uint8_t { None, Bool, Int, Double, String, Tensor, List, Tuple, Dict, RRef, Object };

  Value() = default;
  Value(None) {}                                               // NOLINT(google-explicit-constructor)
  Value(bool b) : v_(b) {}                                     // NOLINT
  Value(int i) : v_(static_cast<int64_t>(i)) {}                // NOLINT
  Value(int64_t i) : v_(i) {}                                  // NOLINT
  Value(double d) : v_(d) {}                                   // NOLINT
  Value(const char* s) : v_(std::string(s)) {}                 // NOLINT
  Value(std::string s) : v_(std::move(s)) {}                   // NOLINT
  Value(Tensor t) : v_(std::move(t)) {}                        // NOLINT
  Value(ValueList l) : v_(std::move(l)) {}                     // NOLINT
  Value(Tuple t) : v_(std::move(t)) {}                         // NOLINT
  Value(Dict d) : v_(std::move(d)) {}                          // NOLINT
  Value(RRef r) : v_(std::move(r)) {}                          // NOLINT
  Value(std::shared_ptr<Object> o) : v_(std::move(o)) {}       // NOLINT

  Kind kind() const { return static_cast<Kind>(v_.index()); }
  bool is_none() const { return kind() == Kind::None; }
  bool is(Kind k) const { return kind() == k; }

  // Typed access; a wrong kind throws InvalidArgument "expected <kind>, got <kind>".
  bool as_bool() const;
  int64_t as_int() const;
  double as_double() const;  // an int converts
  const std::string& as_string() const;
  const Tensor& as_tensor() const;
  const ValueList& as_list() const;
  const ValueList& as_tuple() const;
  // The items of a list or a tuple.
  const ValueList& items() const;
  const Dict& as_dict() const;
  const RRef& as_rref() const;
  const std::shared_ptr<Object>& as_object() const;

  // A short description for error messages: "tensor float32 [2, 3]", "tuple of 3", "object RemoteNet".
  std::string describe() const;

 private:
  std::variant<None, bool, int64_t, double, std::string, Tensor, ValueList, Tuple, Dict, RRef,
               std::shared_ptr<Object>>
      v_;
};

std::string_view kind_name(Value::Kind kind);

// Convenience constructors.
inline Value tuple(ValueList items) { return Value(Tuple{std::move(items)}); }
inline Value list(ValueList items) { return Value(std::move(items)); }

// Call arguments: positional and keyword, as Python's (*args, **kwargs).
struct Args {
  ValueList positional;
  Dict kwargs;

  Args() = default;
  Args(std::initializer_list<Value> values) : positional(values) {}
  explicit Args(ValueList values, Dict kw = {}) : positional(std::move(values)), kwargs(std::move(kw)) {}

  size_t size() const { return positional.size(); }
  // The i-th positional argument; a missing one throws InvalidArgument naming the index and the count.
  const Value& at(size_t i) const;
  // A keyword argument, or `fallback` when absent.
  const Value& kwarg(const std::string& key, const Value& fallback) const;
};

}  // namespace braid::rpc
