// The registry's internals shared by the files that define the built-in models (not for users: they go
// through model_registry.h).
//
// Each built-in comes with a `check`: it reads and validates every argument (and layer) the way build()
// would, without creating a module, so that `braid check` reports a bad value before anything starts.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "runtime/models/model_registry.h"

namespace braid::runtime::detail {

struct BuiltinModel {
  ModelDefinition definition;
  std::function<void(const ModelBuild&)> check;
};

// The definitions, one function per file.
std::vector<BuiltinModel> basic_models();  // linear, embedding_bag, mlp (builtin_models.cc)
BuiltinModel sequential_model();           // sequential (sequential_model.cc)
BuiltinModel hybrid_model();               // hybrid (hybrid_model.cc)
std::vector<BuiltinModel> fsdp_models();   // fsdp_nested, transformer (fsdp_models.cc)

// Typed reads of one JSON object's keys, for ModelBuild's accessors ("model.args") and the sequential
// model's layers ("model.layers[2]"): errors read "<prefix>.<key>: expected an integer, got \"abc\"" and
// "<prefix>.<key>: missing (no default)". A null object reads as empty.
class KeyReader {
 public:
  KeyReader(const nlohmann::json& object, std::string prefix);

  int64_t get_int(const std::string& key, std::optional<int64_t> fallback = std::nullopt) const;
  double get_double(const std::string& key, std::optional<double> fallback = std::nullopt) const;
  bool get_bool(const std::string& key, std::optional<bool> fallback = std::nullopt) const;
  std::string get_string(const std::string& key, std::optional<std::string> fallback = std::nullopt) const;
  std::vector<int64_t> get_ints(const std::string& key, std::optional<std::vector<int64_t>> fallback = std::nullopt) const;
  // "<prefix>.<key>" for messages the caller composes.
  std::string where(const std::string& key) const { return prefix_ + "." + key; }

 private:
  // The value of `key`, or nullptr when absent (or null).
  const nlohmann::json* find(const std::string& key) const;
  [[noreturn]] void missing(const std::string& key) const;

  const nlohmann::json& object_;
  std::string prefix_;
};

// " (did you mean 'x'?)" when one of `candidates` is a close spelling of `word`, else "".
std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates);

// Rejects every key of `object` not in `allowed`: InvalidArgument "<where>.<key>: <what> (did you mean
// ...?; accepted: ...)". `object` may be null (nothing to check).
void check_known_keys(const nlohmann::json& object, const std::vector<std::string>& allowed, const std::string& where,
                      const std::string& what);

// A positive-integer argument: "model.args.<key>: must be positive, got 0".
int64_t positive_arg(const ModelBuild& b, const std::string& key, std::optional<int64_t> fallback = std::nullopt);

}  // namespace braid::runtime::detail
