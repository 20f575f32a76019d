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
// Milliseconds: a plain integer, or with a unit suffix ms, s, m (e.g. "30s"). At most kMaxDuration.
std::chrono::milliseconds get_duration(const char* name, std::chrono::milliseconds fallback);

// The longest duration braid accepts anywhere it reads one (a timeout, a heartbeat, a TTL, from the
// environment, a job file or a flag): 30 days. Longer is no real timeout, and bounding it keeps every
// conversion in range: a deadline is steady_clock::now() plus the duration in nanoseconds, and 1e10 s
// would overflow int64 nanoseconds (292 years) into a deadline already past.
inline constexpr std::chrono::seconds kMaxDuration{30LL * 24 * 3600};

// A duration given in seconds as a number (a job file's timeout_s, a --timeout flag), checked and
// converted. Throws InvalidArgument "<what>: must be a duration in seconds, > 0 (or >= 0 with allow_zero)
// and at most 2592000 (30 days), got <v>" for NaN, an infinity, a value out of that range, or one that
// rounds to 0 ms.
std::chrono::milliseconds checked_seconds(double seconds, std::string_view what, bool allow_zero = false);
// The reason checked_seconds would give, or "" when `seconds` is accepted (for callers that report
// errors their own way, such as the job parser with its file and line).
std::string seconds_range_error(double seconds, bool allow_zero = false);

// The parsers behind the getters, for values that come from files or flags. `what` names the source
// in error messages (e.g. "BRAID_TIMEOUT" or "--timeout").
int64_t parse_int(std::string_view text, std::string_view what);
bool parse_bool(std::string_view text, std::string_view what);
std::chrono::milliseconds parse_duration(std::string_view text, std::string_view what);
// Sizes with an optional suffix K, M, G (powers of 1024) or KB/MB/GB, e.g. "25M".
int64_t parse_size(std::string_view text, std::string_view what);

}  // namespace braid::env
