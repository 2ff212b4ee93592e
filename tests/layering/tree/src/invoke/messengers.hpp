// A private header of invoke.
#pragma once
#include "rdmx/invoke/messenger.hpp"
