// Private to the fabric: the process's table of calls awaiting a reply,
// shared by every thread of the process (a reply may be received by another
// thread than the caller's, and a peer's failure fails its entries).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <span>
#include <string>

#include "rdmx/core/error.hpp"
#include "rdmx/core/token_table.hpp"
#include "rdmx/fabric/synchronizer.hpp"

namespace rdmx::fabric {

// Calls awaiting a reply (consumed notifications, returned values, broadcast
// acknowledgements). Tokens carry a generation, so a stale or forged token
// is reported instead of touching freed state.
class PendingReplies {
 public:
  using Completion = std::function<void(const Error* failure, std::span<const std::byte> result)>;
  // What nearly every call waits with: the caller's Synchronizer, counted
  // down (or failed) once the result, if any, is copied to `result`. Held
  // by value: a Completion capturing these three would allocate per call.
  struct Waiter {
    Synchronizer* sync = nullptr;
    void* result = nullptr;
    std::size_t result_size = 0;
    void finish(const Error* failure, std::span<const std::byte> bytes) const;
  };
  // dest_process = ~0u: waits on every process (broadcast). Throws
  // peer_failed when that process (for a broadcast: any) has failed: a
  // reply registered after fail_process swept would wait for ever.
  std::uint64_t add(std::uint32_t dest_process, std::int64_t replies, Waiter waiter);
  std::uint64_t add(std::uint32_t dest_process, std::int64_t replies, Completion done);
  // One reply arrived; runs the completion when the last one has.
  void complete(std::uint64_t token, const Error* failure, std::span<const std::byte> result);
  void fail_process(std::uint32_t process, const std::string& why);
  // Forget a token whose call was never sent.
  void cancel(std::uint64_t token);

 private:
  struct Entry {
    std::uint32_t dest_process = 0;
    std::int64_t replies = 0;
    Waiter waiter;    // used when done is empty
    Completion done;
    void finish(const Error* failure, std::span<const std::byte> bytes) const {
      if (done)
        done(failure, bytes);
      else
        waiter.finish(failure, bytes);
    }
  };
  // Under mutex_: a free entry for a call to dest_process (throws as add).
  TokenTable<Entry>::Added take_entry(std::uint32_t dest_process, std::int64_t replies);
  std::mutex mutex_;
  TokenTable<Entry> entries_;
  std::map<std::uint32_t, std::string> failed_;  // processes fail_process was told of, and why
};

}  // namespace rdmx::fabric
