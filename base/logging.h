// Process-wide logging on spdlog. One logger per subsystem ("braid", "braid.tensor", "braid.coll",
// "braid.rpc", "braid.autograd", "braid.runtime", ...), all writing to one stderr sink with the pattern
//   [2026-11-23 10:00:00.123] [braid.coll] [info] [rank 3/8 trainer] message
// The rank/role field is empty until set_identity() is called by the bootstrap.
//
// Levels come from, in order: an explicit set_levels() call (the CLI's --log-level), BRAID_LOG_LEVEL,
// then BRAID_LOG. A level spec is "info" or "warn,braid.rpc=debug" (default level, then per-logger levels).
//
// Thread-safety: every function here may be called from any thread.
#pragma once

#include <spdlog/spdlog.h>

#include <memory>
#include <string>
#include <string_view>

namespace braid::logging {

// The logger of a subsystem, created on first use with the current pattern and levels.
std::shared_ptr<spdlog::logger> get(std::string_view name = "braid");

// Stamps every later line of every logger with "rank R/W role".
void set_identity(int rank, int world_size, std::string_view role);

// Applies a level spec (see above). Throws InvalidArgument on an unknown level or a malformed entry.
void set_levels(std::string_view spec);

// Reads BRAID_LOG_LEVEL / BRAID_LOG once; called by get() on first use.
void init_from_env();

// Writes the last 64 debug-level-or-above lines of every logger (kept even when below the level);
// called before a TimeoutError or CommError is thrown so the log shows what led to it.
void dump_backtrace();

// The line prefix for the current identity, e.g. "rank 3/8 trainer" ("" before set_identity).
std::string identity();

}  // namespace braid::logging
