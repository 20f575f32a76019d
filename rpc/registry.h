// The registry of what remote workers may call: functions and classes, by name.
//
//   registry.add_function("add", [](const Args& a) -> Value { ... });
//   registry.add_async_function("slow_add", [](const Args& a) -> Future<Value> { ... });
//   registry.add_class<RemoteNet>("RemoteNet")
//       .constructor([](const Args& a) { return std::make_shared<RemoteNet>(a.at(0).as_int()); })
//       .method("forward", [](RemoteNet& net, const Args& a) -> Value { ... })
//       .to_value([](const RemoteNet& net) -> Value { ... });   // optional: what to_here() sends
//
// rpc_sync/rpc_async run a function by name; remote() runs a function or constructs a class, keeping the
// result on the callee behind an RRef; rref.rpc_sync().call("forward", args) runs a method of the object
// there. An async function returns a Future: the worker thread is released while it is pending and the
// reply goes out when it completes. Names are unique across functions and classes (a duplicate is an
// InvalidArgument naming it). Registration is expected before init_rpc but is safe at any time.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <variant>
#include <vector>

#include "base/check.h"
#include "base/future.h"
#include "rpc/value.h"

namespace braid::rpc {

using SyncFunction = std::function<Value(const Args&)>;
using AsyncFunction = std::function<Future<Value>(const Args&)>;
// A callable entry: either kind.
using Callable = std::variant<SyncFunction, AsyncFunction>;

using SyncMethod = std::function<Value(Object&, const Args&)>;
using AsyncMethod = std::function<Future<Value>(Object&, const Args&)>;
using Method = std::variant<SyncMethod, AsyncMethod>;

struct ClassEntry {
  std::string name;
  std::function<std::shared_ptr<Object>(const Args&)> construct;
  std::map<std::string, Method, std::less<>> methods;
  std::function<Value(const Object&)> to_value;  // empty: instances cannot be copied to other workers
};

// A registered class's instance, type-erased.
template <class T>
class ObjectHolder final : public Object {
 public:
  ObjectHolder(std::shared_ptr<T> value, std::shared_ptr<const ClassEntry> cls)
      : value_(std::move(value)), cls_(std::move(cls)) {}
  const std::string& type_name() const override { return cls_->name; }
  Value to_value() const override { return cls_->to_value ? cls_->to_value(*this) : Object::to_value(); }
  T& get() const { return *value_; }
  const std::shared_ptr<T>& shared() const { return value_; }
  const ClassEntry* class_entry() const override { return cls_.get(); }

 private:
  std::shared_ptr<T> value_;
  std::shared_ptr<const ClassEntry> cls_;
};

// The T inside an object value (e.g. rref.local_value()); InvalidArgument names both types when it is not.
template <class T>
T& object_as(const Value& v, const std::string& expected_class) {
  const auto& obj = v.as_object();
  auto* holder = dynamic_cast<ObjectHolder<T>*>(obj.get());
  BRAID_CHECK_ARG(holder != nullptr, "rpc: expected an object of class '{}', got {}", expected_class, v.describe());
  return holder->get();
}

class Registry;

template <class T>
class ClassBuilder {
 public:
  ClassBuilder(Registry& registry, std::shared_ptr<ClassEntry> entry) : registry_(registry), entry_(std::move(entry)) {}

  ClassBuilder& constructor(std::function<std::shared_ptr<T>(const Args&)> make) {
    std::weak_ptr<const ClassEntry> self = entry_;
    entry_->construct = [make = std::move(make), self](const Args& a) -> std::shared_ptr<Object> {
      return std::make_shared<ObjectHolder<T>>(make(a), self.lock());
    };
    return *this;
  }
  ClassBuilder& method(const std::string& name, std::function<Value(T&, const Args&)> fn) {
    add_method(name, SyncMethod([fn = std::move(fn)](Object& o, const Args& a) { return fn(unwrap(o), a); }));
    return *this;
  }
  ClassBuilder& async_method(const std::string& name, std::function<Future<Value>(T&, const Args&)> fn) {
    add_method(name, AsyncMethod([fn = std::move(fn)](Object& o, const Args& a) { return fn(unwrap(o), a); }));
    return *this;
  }
  ClassBuilder& to_value(std::function<Value(const T&)> fn) {
    entry_->to_value = [fn = std::move(fn)](const Object& o) { return fn(unwrap(const_cast<Object&>(o))); };
    return *this;
  }

 private:
  static T& unwrap(Object& o) { return static_cast<ObjectHolder<T>&>(o).get(); }
  void add_method(const std::string& name, Method m);
  Registry& registry_;
  std::shared_ptr<ClassEntry> entry_;
};

class Registry {
 public:
  void add_function(const std::string& name, SyncFunction fn);
  void add_async_function(const std::string& name, AsyncFunction fn);
  template <class T>
  ClassBuilder<T> add_class(const std::string& name) {
    return ClassBuilder<T>(*this, add_class_entry(name));
  }

  // nullptr when absent.
  std::shared_ptr<const Callable> find_function(const std::string& name) const;
  std::shared_ptr<const ClassEntry> find_class(const std::string& name) const;
  // A copy of the method (empty when absent), read under the registry's lock.
  std::optional<Method> find_method(const ClassEntry& entry, const std::string& name) const;
  // Every registered name (functions and classes), sorted; for "unknown function" errors.
  std::vector<std::string> names() const;

  // Used by ClassBuilder: methods are added under the registry's lock.
  void add_method(ClassEntry& entry, const std::string& name, Method m);

 private:
  std::shared_ptr<ClassEntry> add_class_entry(const std::string& name);
  void check_new_name(const std::string& name) const;  // caller holds mu_

  mutable std::shared_mutex mu_;
  std::map<std::string, std::shared_ptr<const Callable>, std::less<>> functions_;
  std::map<std::string, std::shared_ptr<ClassEntry>, std::less<>> classes_;
};

template <class T>
void ClassBuilder<T>::add_method(const std::string& name, Method m) {
  registry_.add_method(*entry_, name, std::move(m));
}

// The process-wide registry init_rpc's agent serves.
Registry& global_registry();

}  // namespace braid::rpc
