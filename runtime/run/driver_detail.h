// Private to runtime/run/driver*.cc: the small helpers the driver's files share.
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "base/logging.h"
#include "rpc/api.h"

namespace braid::runtime::driver_detail {

using Clock = std::chrono::steady_clock;

inline rpc::Millis ms(double seconds) { return rpc::Millis(static_cast<int64_t>(seconds * 1000)); }

inline double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

inline std::shared_ptr<spdlog::logger> log() { return logging::get("braid.run"); }

// The ranks other than this one.
inline std::vector<int> other_ranks(int world_size, int self) {
  std::vector<int> out;
  for (int r = 0; r < world_size; ++r) {
    if (r != self) out.push_back(r);
  }
  return out;
}

}  // namespace braid::runtime::driver_detail
