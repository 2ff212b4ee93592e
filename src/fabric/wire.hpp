// Private to the fabric: the wire format of send-based calls and their
// replies, as UCX active messages carry them. Sender and receiver must agree
// on it byte for byte; a change bumps wire_version.
#pragma once
#include <cstdint>

#include "rdmx/fabric/call_family.hpp"

namespace rdmx::fabric {

enum AmId : unsigned { am_call = 11, am_reply = 12 };
inline constexpr std::uint8_t wire_version = 1;

struct CallHeader {  // followed by the closure bytes in the AM header
  std::uint64_t function;
  std::uint64_t token;  // 0: the caller wants no reply
  std::uint32_t source_process;
  std::uint32_t source_thread;
  std::uint32_t destination_thread;
  std::uint16_t closure_size;
  CallKind kind;
  std::uint8_t version;
};

struct ReplyHeader {  // followed by nothing; AM data = result bytes or error text
  std::uint64_t token;
  std::uint32_t error;  // 0 ok, else 1 + Errc
  std::uint32_t reserved;
};

}  // namespace rdmx::fabric
