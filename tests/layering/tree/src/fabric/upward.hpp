// Fixture for layering.refuses: a fabric file that includes a layer above
// it and a private header of another layer. Never compiled.
#pragma once
#include "rdmx/core/error.hpp"
#include "rdmx/invoke/messenger.hpp"
#include "../memory/free_list.hpp"
