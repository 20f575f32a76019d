#include "base/env.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include "base/check.h"

namespace braid::env {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// Splits "30s" into (30, "s"). Throws on a missing or malformed number.
std::pair<int64_t, std::string> split_number_unit(std::string_view text, std::string_view what,
                                                  std::string_view expected) {
  const std::string_view t = trim(text);
  int64_t value = 0;
  const auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), value);
  BRAID_CHECK_ARG(ec == std::errc() && ptr != t.data(), "{}: expected {}, got '{}'", what, expected, text);
  return {value, lower(trim(std::string_view(ptr, static_cast<size_t>(t.data() + t.size() - ptr))))};
}

}  // namespace

std::optional<std::string> get(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

std::string require(const char* name, std::string_view purpose) {
  auto v = get(name);
  BRAID_CHECK_ARG(v.has_value(), "environment variable {} is not set ({})", name, purpose);
  return *v;
}

int64_t parse_int(std::string_view text, std::string_view what) {
  const std::string_view t = trim(text);
  int64_t value = 0;
  const auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), value);
  BRAID_CHECK_ARG(ec != std::errc::result_out_of_range, "{}: integer '{}' is out of range", what, text);
  BRAID_CHECK_ARG(ec == std::errc() && ptr == t.data() + t.size() && !t.empty(),
                  "{}: expected an integer, got '{}'", what, text);
  return value;
}

bool parse_bool(std::string_view text, std::string_view what) {
  const std::string v = lower(trim(text));
  if (v == "1" || v == "true" || v == "yes" || v == "on") return true;
  if (v == "0" || v == "false" || v == "no" || v == "off") return false;
  BRAID_THROW(InvalidArgument, "{}: expected a boolean (1/0, true/false, yes/no, on/off), got '{}'", what, text);
}

std::chrono::milliseconds parse_duration(std::string_view text, std::string_view what) {
  auto [value, unit] = split_number_unit(text, what, "a duration such as 500ms, 30s or 2m");
  BRAID_CHECK_ARG(value >= 0, "{}: duration must not be negative, got '{}'", what, text);
  int64_t ms_per_unit = 0;
  if (unit.empty() || unit == "ms") ms_per_unit = 1;
  else if (unit == "s") ms_per_unit = 1000;
  else if (unit == "m" || unit == "min") ms_per_unit = 60'000;
  else if (unit == "h") ms_per_unit = 3'600'000;
  else BRAID_THROW(InvalidArgument, "{}: unknown duration unit '{}' in '{}' (use ms, s, m or h)", what, unit, text);
  // Compared before multiplying, so that a huge count cannot wrap around into range.
  const int64_t max_ms = std::chrono::milliseconds(kMaxDuration).count();
  BRAID_CHECK_ARG(value <= max_ms / ms_per_unit, "{}: duration '{}' is longer than the limit of {} s (30 days)", what,
                  text, kMaxDuration.count());
  return std::chrono::milliseconds(value * ms_per_unit);
}

std::string seconds_range_error(double seconds, bool allow_zero) {
  const std::string range = fmt::format("{} 0 and at most {} (30 days)", allow_zero ? ">=" : ">", kMaxDuration.count());
  const bool low_ok = allow_zero ? seconds >= 0 : seconds > 0;  // false for NaN
  if (!low_ok || !(seconds <= static_cast<double>(kMaxDuration.count()))) {
    return fmt::format("must be a duration in seconds, {}, got {}", range, seconds);
  }
  // 0.0001 s would become a 0 ms timeout, which expires at once: say so rather than time out at run time.
  if (!allow_zero && seconds * 1000 < 1) {
    return fmt::format("must be a duration in seconds of at least 0.001 (1 ms), got {}", seconds);
  }
  return "";
}

std::chrono::milliseconds checked_seconds(double seconds, std::string_view what, bool allow_zero) {
  const std::string error = seconds_range_error(seconds, allow_zero);
  BRAID_CHECK_ARG(error.empty(), "{}: {}", what, error);
  return std::chrono::milliseconds(static_cast<int64_t>(std::llround(seconds * 1000)));
}

int64_t parse_size(std::string_view text, std::string_view what) {
  auto [value, unit] = split_number_unit(text, what, "a size such as 4096, 64K or 25M");
  BRAID_CHECK_ARG(value >= 0, "{}: size must not be negative, got '{}'", what, text);
  int shift = 0;
  if (unit.empty() || unit == "b") shift = 0;
  else if (unit == "k" || unit == "kb" || unit == "kib") shift = 10;
  else if (unit == "m" || unit == "mb" || unit == "mib") shift = 20;
  else if (unit == "g" || unit == "gb" || unit == "gib") shift = 30;
  else BRAID_THROW(InvalidArgument, "{}: unknown size unit '{}' in '{}' (use K, M or G)", what, unit, text);
  BRAID_CHECK_ARG(value <= (INT64_MAX >> shift), "{}: size '{}' is too large", what, text);
  return value << shift;
}

int64_t get_int(const char* name, int64_t fallback) {
  auto v = get(name);
  return v ? parse_int(*v, name) : fallback;
}

int64_t require_int(const char* name, std::string_view purpose) {
  return parse_int(require(name, purpose), name);
}

bool get_bool(const char* name, bool fallback) {
  auto v = get(name);
  return v ? parse_bool(*v, name) : fallback;
}

std::chrono::milliseconds get_duration(const char* name, std::chrono::milliseconds fallback) {
  auto v = get(name);
  return v ? parse_duration(*v, name) : fallback;
}

}  // namespace braid::env
