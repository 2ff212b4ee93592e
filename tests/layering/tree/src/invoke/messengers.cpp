// An invoke source that keeps the rules: its own private header, its own
// public header, core's through angle brackets, the standard library.
#include "messengers.hpp"

#include <rdmx/core/error.hpp>
#include <vector>

#include "rdmx/invoke/messenger.hpp"
