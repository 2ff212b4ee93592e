// rdmx::serial: HPX-style chunked serialization (docs/serialization.md).
// Everything a program needs to serialize its values: the archives, the
// standard types, encode/decode, SerializeBuffer. The RMA containers
// (rma_vector.hpp, rma_value.hpp) and the registration cache
// (registration_cache.hpp) need registered memory and a UCX context and are
// included on their own.
#pragma once
#include "rdmx/serial/access.hpp"
#include "rdmx/serial/bitwise.hpp"
#include "rdmx/serial/chunk.hpp"
#include "rdmx/serial/codec.hpp"
#include "rdmx/serial/input_archive.hpp"
#include "rdmx/serial/options.hpp"
#include "rdmx/serial/output_archive.hpp"
#include "rdmx/serial/serialize_buffer.hpp"
#include "rdmx/serial/signature.hpp"
#include "rdmx/serial/std/array.hpp"
#include "rdmx/serial/std/map.hpp"
#include "rdmx/serial/std/memory.hpp"
#include "rdmx/serial/std/optional.hpp"
#include "rdmx/serial/std/set.hpp"
#include "rdmx/serial/std/string.hpp"
#include "rdmx/serial/std/tuple.hpp"
#include "rdmx/serial/std/variant.hpp"
#include "rdmx/serial/std/vector.hpp"
#include "rdmx/serial/wire.hpp"
