// The message of the braid::InvalidArgument a callable throws, for tests that check an error's exact words.
#pragma once

#include <catch2/catch.hpp>

#include <string>
#include <utility>

#include "base/error.h"

namespace braid::testing {

// Fails the test when `f` throws nothing or something other than InvalidArgument.
template <class F>
std::string error_of(F&& f) {
  try {
    std::forward<F>(f)();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  FAIL("expected an InvalidArgument");
  return "";
}

}  // namespace braid::testing
