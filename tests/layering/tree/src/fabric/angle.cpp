// A fabric source that reaches a layer above it with angle brackets.
#include <rdmx/core/error.hpp>
#include <vector>

#include <rdmx/invoke/messenger.hpp>
