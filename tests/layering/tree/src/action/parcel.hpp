// A private header of action.
#pragma once
#include "rdmx/core/error.hpp"
