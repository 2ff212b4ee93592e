// Shared by the single-process tests: the rdmx::Error a callable throws.
#pragma once
#include <gtest/gtest.h>

#include "rdmx/core/error.hpp"

namespace rdmx::testing {

// The error `f` throws, or a test failure when it throws none.
template <class F>
Error error_from(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no rdmx::Error thrown";
  return Error(Errc::transport, "none");
}

}  // namespace rdmx::testing
