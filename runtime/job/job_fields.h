// Typed, checked reads of one section of a job (a JSON object), for the job parser.
//
// A Fields object stands for one mapping of the job file ("optimizer", "roles", the top level). It rejects
// keys it does not know (suggesting the closest known one), and its getters check each value's type and
// range, leaving the default in place when the key is absent or null. Every failure throws JobError with
// the dotted key; the parser's entry points turn it into the user's message with the file and line.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace braid::runtime::job_detail {

// A bad key or value. `key` is the dotted path ("train.batch_size", "roles.trainers[1]").
struct JobError : std::runtime_error {
  JobError(std::string key_, const std::string& reason) : std::runtime_error(reason), key(std::move(key_)) {}
  std::string key;
};

[[noreturn]] void fail(const std::string& key, const std::string& reason);

// How a value reads in a message: its JSON type and text ("the string \"abc\"", "the number 2.5").
std::string describe(const nlohmann::json& value);

// The known name closest to `name` by edit distance, when it is close enough to be a likely typo.
std::optional<std::string> closest(const std::string& name, const std::vector<std::string>& known);

// "unknown key; did you mean 'x'? (known keys: a, b, c)" or, with no close name, the known keys only.
std::string unknown_key_reason(const std::string& name, const std::vector<std::string>& known);

template <typename E>
using EnumNames = std::initializer_list<std::pair<const char*, E>>;

class Fields {
 public:
  // `value` must be an object or null (an absent section); `path` is its dotted key ("" for the top).
  Fields(const nlohmann::json& value, std::string path, std::vector<std::string> known);

  bool has(const std::string& key) const;
  const nlohmann::json& raw(const std::string& key) const;  // null when absent
  std::string path(const std::string& key) const;

  void read(const std::string& key, bool& out) const;
  void read(const std::string& key, std::string& out) const;
  void read(const std::string& key, double& out) const;  // any number; NaN rejected
  void read(const std::string& key, int& out, int64_t min, int64_t max = INT32_MAX) const;
  void read(const std::string& key, int64_t& out, int64_t min) const;
  void read(const std::string& key, uint64_t& out) const;

  template <typename E>
  void read_enum(const std::string& key, E& out, EnumNames<E> names) const {
    if (!has(key)) return;
    std::string text;
    read(key, text);
    std::vector<std::string> allowed;
    for (const auto& [name, value] : names) {
      if (text == name) {
        out = value;
        return;
      }
      allowed.emplace_back(name);
    }
    fail(path(key), bad_choice(text, allowed));
  }

  static std::string bad_choice(const std::string& text, const std::vector<std::string>& allowed);

 private:
  const nlohmann::json& value_;
  std::string path_;
};

// Integer value of `value` (at `key`) or JobError naming what it is instead.
int64_t as_integer(const nlohmann::json& value, const std::string& key);

}  // namespace braid::runtime::job_detail
