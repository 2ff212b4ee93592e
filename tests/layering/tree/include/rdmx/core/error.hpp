// A public header of core.
#pragma once
#include <string>
