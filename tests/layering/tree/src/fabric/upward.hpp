// A fabric header that includes a layer above it and a private header of
// another layer, with quoted names.
#pragma once
#include "rdmx/core/error.hpp"
#include "rdmx/invoke/messenger.hpp"
#include "../memory/free_list.hpp"
