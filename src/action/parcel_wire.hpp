// Private to the action layer: the header of a parcel message. It travels
// as the captures of the one-sided or send-based call that carries the
// message (parcel_path.cpp), whose buffer is the flattened archive; the
// sender writes it and the destination's on_message reads it, so both read
// this one definition.
#pragma once
#include <cstdint>
#include <type_traits>

namespace rdmx::parcel {

enum Kind : std::uint8_t { kind_request = 1, kind_reply = 2 };
enum Flag : std::uint8_t {
  wants_reply = 1,  // request: the caller waits for a reply
  rendezvous = 2,   // the archive has chunks to pull; release the sender afterwards
  is_failure = 4,   // reply: the message is the error text, errc the code
  by_one_sided = 8, // the caller chose Path::one_sided: request and reply go so
  by_send = 16,     // the caller chose Path::send
};
constexpr std::uint8_t path_flags = by_one_sided | by_send;

struct Header {
  // The first word is read as the member `kind` selects: the two never
  // travel together, so they share it and the header stays 32 bytes.
  union {
    std::uint64_t action = 0;  // kind_request: the id of the action to run
    std::uint64_t release;     // kind_reply: the replier's entry to release once the chunks are pulled (0: none)
  };
  std::uint64_t token = 0;  // the caller's entry (0: none): a request's answers go to it, a reply completes it
  std::uint32_t source_process = 0;
  std::uint32_t source_thread = 0;
  std::uint16_t errc = 0;  // failed reply
  std::uint8_t kind = 0;
  std::uint8_t flags = 0;
  std::uint32_t reserved = 0;
};
static_assert(std::is_trivially_copyable_v<Header> && sizeof(Header) == 32);

}  // namespace rdmx::parcel
