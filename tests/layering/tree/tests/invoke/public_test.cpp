// A test that uses invoke's public headers only.
#include <gtest/gtest.h>

#include <rdmx/invoke/messenger.hpp>
