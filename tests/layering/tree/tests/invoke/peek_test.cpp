// A test that looks inside invoke.
#include <gtest/gtest.h>

#include "../../src/invoke/messengers.hpp"
#include "rdmx/invoke/messenger.hpp"
