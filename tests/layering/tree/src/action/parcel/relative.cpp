// An action source in a subfolder: its own layer's private header reached
// with ../ is fine; invoke's private header reached with ../../ is not.
#include "../parcel.hpp"
#include "rdmx/invoke/messenger.hpp"

#include "../../invoke/messengers.hpp"
