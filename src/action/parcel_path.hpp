// Private to the action layer: which path a parcel message takes to its
// destination, a one-sided call (one RDMA write into the destination's
// chunk ring) or a send-based call, and sending one message on it. Kept
// apart from the parcels' protocol (parcel_send.cpp, parcel_pull.cpp) so
// that adding a path changes this file only.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>

#include "rdmx/action/parcel.hpp"
#include "rdmx/fabric/call_family.hpp"
#include "rdmx/fabric/identity.hpp"
#include "rdmx/fabric/job.hpp"
#include "parcel_wire.hpp"

namespace rdmx::parcel {

class ParcelPath {
 public:
  // Reads RDMX_PARCEL_CALLS (throws on a bad value).
  explicit ParcelPath(Job& job);
  // The process-wide choice for messages to `process`: one-sided calls (up
  // to eager_limit bytes; larger ones as send-based calls, which have no
  // chunk size limit) or send-based calls only. RDMX_PARCEL_CALLS=auto (the
  // default) chooses send-based where UCX emulates one-sided writes (TCP):
  // there each write waits for the destination's service thread.
  bool one_sided(std::uint32_t process) const;
  // Up to how many bytes a message goes one-sided (0: none), for a message
  // whose header flags carry the caller's Path (by_one_sided, by_send;
  // neither: the process-wide choice).
  std::size_t eager_limit(std::uint32_t process, std::uint8_t flags) const {
    if (flags & by_send) return 0;
    if (flags & by_one_sided) return one_sided_limit_;
    return one_sided(process) ? one_sided_limit_ : 0;
  }
  // The header flags for a call that chose `path`; throws invalid_argument
  // for a path this job cannot take.
  std::uint8_t flags_for(Path path) const;

 private:
  enum Choice : std::int8_t { unknown, yes, no };
  Choice forced_ = unknown;                       // RDMX_PARCEL_CALLS=one-sided|send
  std::size_t one_sided_limit_;
  bool helpers_;
};

// One parcel message to thread `to` on the path `path` chooses; the
// destination's worker receives it (its on_message) from its progress.
// Returns whether it went as a fused record.
bool transmit(ParcelPath& path, ThreadId to, const Header& h, std::span<const std::byte> message);

// The receiving end of a fused parcel record (transmit): its captures are
// the Header, then the message.
struct FusedRecord {
  static void invoke(fabric::Incoming& in);
};

}  // namespace rdmx::parcel
