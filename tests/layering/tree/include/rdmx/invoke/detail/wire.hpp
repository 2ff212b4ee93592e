// A public header of invoke in a subfolder, reached relative to its includer.
#pragma once
#include <cstdint>
