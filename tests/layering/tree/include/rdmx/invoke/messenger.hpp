// A public header of invoke.
#pragma once
#include "rdmx/core/error.hpp"
#include "detail/wire.hpp"
