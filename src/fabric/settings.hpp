// The fabric layer's table of settings (settings.cpp): what it reads, through
// rows that the start-up check and --rdmx-help share.
#pragma once
#include "rdmx/core/env.hpp"

extern "C" const rdmx::env::Table rdmx_fabric_settings;
