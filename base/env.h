// Environment and configuration parsing. Every parse error names the variable and the bad value.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace braid::env {

// The variable's value, or nullopt when unset. An empty value counts as set.
std::optional<std::string> get(const char* name);

// The variable's value; throws InvalidArgument naming the variable (and `purpose`) when it is unset.
std::string require(const char* name, std::string_view purpose);

// Integer value (decimal); `fallback` when unset. Throws InvalidArgument on junk or overflow.
int64_t get_int(const char* name, int64_t fallback);
// Integer value that must be set; throws naming the variable otherwise.
int64_t require_int(const char* name, std::string_view purpose);
// 1/0, true/false, yes/no, on/off (any case); `fallback` when unset.
bool get_bool(const char* name, bool fallback);
// Milliseconds: a plain integer, or with a unit suffix ms, s, m (e.g. "30s").
std::chrono::milliseconds get_duration(const char* name, std::chrono::milliseconds fallback);

// The parsers behind the getters, for values that come from files or flags. `what` names the source
// in error messages (e.g. "BRAID_TIMEOUT" or "--timeout").
int64_t parse_int(std::string_view text, std::string_view what);
bool parse_bool(std::string_view text, std::string_view what);
std::chrono::milliseconds parse_duration(std::string_view text, std::string_view what);
// Sizes with an optional suffix K, M, G (powers of 1024) or KB/MB/GB, e.g. "25M".
int64_t parse_size(std::string_view text, std::string_view what);

}  // namespace braid::env
