// The check of every flag given in seconds (--timeout, --kill-timeout, --term-timeout): the same range as
// a job file's durations (env::checked_seconds), so that no flag can ask for a wait whose deadline
// overflows the clock.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdlib>
#include <string>

#include "base/env.h"

namespace braid::cli {

inline CLI::Validator seconds_flag() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        if (text.empty() || end != text.c_str() + text.size()) return "expected a number of seconds, got '" + text + "'";
        return env::seconds_range_error(v);
      },
      "SECONDS in (0, 2592000]");
}

}  // namespace braid::cli
