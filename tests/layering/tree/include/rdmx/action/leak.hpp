// A public header of action that includes its own layer's private header:
// a program that includes it cannot find that header once installed.
#pragma once
#include "rdmx/core/error.hpp"
#include "../../../src/action/parcel.hpp"
