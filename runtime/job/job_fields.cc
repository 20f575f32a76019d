#include "runtime/job/job_fields.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace braid::runtime::job_detail {
namespace {

using nlohmann::json;

const json& null_json() {
  static const json kNull;
  return kNull;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  // One row of the Levenshtein table at a time: keys are short.
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

void fail(const std::string& key, const std::string& reason) { throw JobError(key, reason); }

std::string describe(const json& value) {
  switch (value.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return fmt::format("the boolean {}", value.dump());
    case json::value_t::string: return fmt::format("the string {}", value.dump());
    case json::value_t::array: return "a list";
    case json::value_t::object: return "a mapping";
    default: return fmt::format("the number {}", value.dump());
  }
}

std::optional<std::string> closest(const std::string& name, const std::vector<std::string>& known) {
  std::optional<std::string> best;
  size_t best_distance = 0;
  for (const auto& k : known) {
    const size_t d = edit_distance(name, k);
    if (!best || d < best_distance) {
      best = k;
      best_distance = d;
    }
  }
  // A third of the name (at least 2 edits) still reads as a typo: "batchsize", "lerning_rate", "trainer".
  const size_t limit = std::max<size_t>(2, name.size() / 3);
  if (best && best_distance <= limit) return best;
  return std::nullopt;
}

std::string unknown_key_reason(const std::string& name, const std::vector<std::string>& known) {
  if (auto near = closest(name, known)) {
    return fmt::format("unknown key; did you mean '{}'? (known keys: {})", *near, join(known));
  }
  return fmt::format("unknown key (known keys: {})", join(known));
}

int64_t as_integer(const json& value, const std::string& key) {
  if (value.is_number_integer() && !value.is_number_unsigned()) return value.get<int64_t>();
  if (value.is_number_unsigned()) {
    const auto u = value.get<uint64_t>();
    if (u > static_cast<uint64_t>(INT64_MAX)) fail(key, fmt::format("{} is too large", u));
    return static_cast<int64_t>(u);
  }
  fail(key, fmt::format("expected an integer, got {}", describe(value)));
}

Fields::Fields(const json& value, std::string path, std::vector<std::string> known)
    : value_(value.is_null() ? null_json() : value), path_(std::move(path)) {
  if (!value_.is_null() && !value_.is_object()) {
    fail(path_, fmt::format("expected a mapping of keys ({}), got {}", join(known), describe(value_)));
  }
  if (value_.is_null()) return;
  for (const auto& [key, item] : value_.items()) {
    if (std::find(known.begin(), known.end(), key) == known.end())
      fail(this->path(key), unknown_key_reason(key, known));
  }
}

bool Fields::has(const std::string& key) const {
  return value_.is_object() && value_.contains(key) && !value_.at(key).is_null();
}

const json& Fields::raw(const std::string& key) const { return has(key) ? value_.at(key) : null_json(); }

std::string Fields::path(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }

void Fields::read(const std::string& key, bool& out) const {
  if (!has(key)) return;
  const json& v = raw(key);
  if (!v.is_boolean()) fail(path(key), fmt::format("expected true or false, got {}", describe(v)));
  out = v.get<bool>();
}

void Fields::read(const std::string& key, std::string& out) const {
  if (!has(key)) return;
  const json& v = raw(key);
  if (!v.is_string()) fail(path(key), fmt::format("expected a string, got {}", describe(v)));
  out = v.get<std::string>();
}

void Fields::read(const std::string& key, double& out) const {
  if (!has(key)) return;
  const json& v = raw(key);
  if (!v.is_number()) fail(path(key), fmt::format("expected a number, got {}", describe(v)));
  const double d = v.get<double>();
  if (std::isnan(d)) fail(path(key), "expected a number, got .nan");
  out = d;
}

void Fields::read(const std::string& key, int& out, int64_t min, int64_t max) const {
  if (!has(key)) return;
  const int64_t v = as_integer(raw(key), path(key));
  if (v < min) fail(path(key), fmt::format("must be >= {}, got {}", min, v));
  if (v > max) fail(path(key), fmt::format("must be <= {}, got {}", max, v));
  out = static_cast<int>(v);
}

void Fields::read(const std::string& key, int64_t& out, int64_t min) const {
  if (!has(key)) return;
  const int64_t v = as_integer(raw(key), path(key));
  if (v < min) fail(path(key), fmt::format("must be >= {}, got {}", min, v));
  out = v;
}

void Fields::read(const std::string& key, uint64_t& out) const {
  if (!has(key)) return;
  const json& v = raw(key);
  if (v.is_number_unsigned()) {
    out = v.get<uint64_t>();
    return;
  }
  const int64_t i = as_integer(v, path(key));
  if (i < 0) fail(path(key), fmt::format("must be >= 0, got {}", i));
  out = static_cast<uint64_t>(i);
}

std::string Fields::bad_choice(const std::string& text, const std::vector<std::string>& allowed) {
  std::string out = fmt::format("'{}' is not one of {}", text, join(allowed));
  if (auto near = closest(text, allowed)) out += fmt::format("; did you mean '{}'?", *near);
  return out;
}

}  // namespace braid::runtime::job_detail
