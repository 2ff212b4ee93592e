// PendingReplies: the process's table of calls awaiting a reply
// (pending_replies.hpp). Callers add to it as they send, whichever thread
// receives a reply completes it, and a failed peer fails its entries.
#include "pending_replies.hpp"

#include <cstring>
#include <utility>
#include <vector>

#include "rdmx/core/log.hpp"

namespace rdmx::fabric {

void PendingReplies::Waiter::finish(const Error* failure, std::span<const std::byte> bytes) const {
  if (failure != nullptr) return sync->fail(failure->code(), failure->what());
  if (result != nullptr) {
    if (bytes.size() != result_size)
      return sync->fail(Errc::protocol, "call_return: the reply has " + std::to_string(bytes.size()) + " bytes, expected " +
                                            std::to_string(result_size));
    std::memcpy(result, bytes.data(), result_size);
  }
  sync->notify();
}

TokenTable<PendingReplies::Entry>::Added PendingReplies::take_entry(std::uint32_t dest_process, std::int64_t replies) {
  if (!failed_.empty()) {
    auto dead = dest_process == ~0u ? failed_.begin() : failed_.find(dest_process);
    if (dead != failed_.end()) throw Error(Errc::peer_failed, dead->second);
  }
  auto added = entries_.add();
  added.value.dest_process = dest_process;
  added.value.replies = replies;
  return added;
}

std::uint64_t PendingReplies::add(std::uint32_t dest_process, std::int64_t replies, Waiter waiter) {
  std::lock_guard lock(mutex_);
  auto added = take_entry(dest_process, replies);
  added.value.waiter = waiter;
  return added.token;
}

std::uint64_t PendingReplies::add(std::uint32_t dest_process, std::int64_t replies, Completion done) {
  std::lock_guard lock(mutex_);
  auto added = take_entry(dest_process, replies);
  added.value.done = std::move(done);
  return added.token;
}

void PendingReplies::complete(std::uint64_t token, const Error* failure, std::span<const std::byte> result) {
  Entry done;
  {
    std::lock_guard lock(mutex_);
    Entry* e = entries_.find(token);
    if (e == nullptr) {
      rdmx::log(rdmx::LogLevel::warn, "ignoring a reply with an unknown token %#llx\n", static_cast<unsigned long long>(token));
      return;
    }
    if (failure == nullptr && --e->replies > 0) return;
    done.waiter = e->waiter;
    done.done = std::move(e->done);
    entries_.erase(token);
  }
  done.finish(failure, result);
}

void PendingReplies::cancel(std::uint64_t token) {
  std::lock_guard lock(mutex_);
  entries_.erase(token);
}

void PendingReplies::fail_process(std::uint32_t process, const std::string& why) {
  std::vector<Entry> failed;
  {
    std::lock_guard lock(mutex_);
    failed_.emplace(process, why);
    entries_.for_each([&](std::uint64_t token, Entry& e) {
      if (e.dest_process != process && e.dest_process != ~0u) return;
      failed.push_back(std::move(e));
      entries_.erase(token);
    });
  }
  Error error(Errc::peer_failed, why);
  for (const Entry& e : failed) e.finish(&error, {});
}

}  // namespace rdmx::fabric
