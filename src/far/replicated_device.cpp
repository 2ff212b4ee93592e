// Replication: each object on several servers, so losing a server loses
// nothing while one copy of each group lives. Copies sit at the same offset
// in every server of a group, so the allocator places an object once.
#include <algorithm>
#include <atomic>
#include <string>
#include <utility>
#include <vector>

#include "rdmx/core/error.hpp"
#include "rdmx/far/device.hpp"

namespace rdmx::far {
namespace {

class ReplicatedDevice final : public Device {
 public:
  ReplicatedDevice(std::unique_ptr<Device> inner, std::size_t copies)
      : inner_(std::move(inner)), copies_(copies), lost_(std::make_unique<std::atomic<bool>[]>(inner_->servers())) {}
  const char* name() const noexcept override { return inner_->name(); }
  std::size_t servers() const noexcept override { return inner_->servers() / copies_; }
  std::uint64_t region_bytes(std::size_t group) const override {
    std::uint64_t bytes = inner_->region_bytes(group * copies_);
    for (std::size_t c = 1; c < copies_; ++c) bytes = std::min(bytes, inner_->region_bytes(group * copies_ + c));
    return bytes;
  }
  std::uint32_t rank_of(std::size_t group) const override { return inner_->rank_of(group * copies_); }

  void read(std::size_t group, std::uint64_t offset, void* local, std::size_t bytes) override {
    check_range(group, offset, bytes);
    on_live_copies(group, false, [&](std::size_t server) { inner_->read(server, offset, local, bytes); });
  }

  // All from each group's first live copy at once; if a copy is lost
  // meanwhile, one by one with fall-back when they finish.
  std::unique_ptr<Reads> start_reads(std::vector<Transfer> transfers) override {
    std::vector<Transfer> inner;
    inner.reserve(transfers.size());
    for (const Transfer& t : transfers) {
      check_range(t.server, t.offset, t.bytes);
      std::size_t c = 0;
      while (c < copies_ && lost_[t.server * copies_ + c].load(std::memory_order_acquire)) ++c;
      if (c == copies_) read(t.server, t.offset, t.local, t.bytes);  // throws: the group is lost
      inner.push_back({t.server * copies_ + c, t.offset, t.local, t.bytes});
    }
    auto reads = std::make_unique<FallBack>(*this, std::move(transfers));
    try {
      reads->inner = inner_->start_reads(std::move(inner));
    } catch (const Error& e) {
      if (e.code() != Errc::peer_failed) throw;
    }
    return reads;
  }

  void write(std::size_t group, std::uint64_t offset, const void* local, std::size_t bytes) override {
    check_range(group, offset, bytes);
    on_live_copies(group, true, [&](std::size_t server) { inner_->write(server, offset, local, bytes); });
  }

  // A reading function runs on the group's first live copy; one that
  // writes runs on every live copy, which keeps the copies identical.
  bool computes() const noexcept override { return inner_->computes(); }

  // Its copies are skipped from now on, even by a batch that has not met
  // the loss yet.
  void process_failed(std::uint32_t process) noexcept override {
    for (std::size_t server = 0; server < inner_->servers(); ++server) {
      try {
        if (inner_->rank_of(server) == process) lost_[server].store(true, std::memory_order_release);
      } catch (...) {
      }
    }
    inner_->process_failed(process);
  }
  void compute(std::size_t group, const Offload& work) override {
    check_range(group, 0, 0);
    on_live_copies(group, work.writes, [&](std::size_t server) { inner_->compute(server, work); });
  }

 private:
  // The first copies' reads; when one fails with a lost peer, every transfer
  // is read again with fall-back over the copies.
  struct FallBack final : Reads {
    FallBack(ReplicatedDevice& d, std::vector<Transfer> t) : device(d), transfers(std::move(t)) {}
    void finish() override {
      if (std::exchange(done, true)) return;
      try {
        if (!inner) throw Error(Errc::peer_failed, "a copy was lost while starting");
        std::exchange(inner, nullptr)->finish();
      } catch (const Error& e) {
        if (e.code() != Errc::peer_failed) throw;
        for (const Transfer& t : transfers) device.read(t.server, t.offset, t.local, t.bytes);
      }
    }
    ReplicatedDevice& device;
    std::vector<Transfer> transfers;
    std::unique_ptr<Reads> inner;
    bool done = false;
  };

  // op(server) on the group's live copies: every one (`all`), or the first
  // that answers. A copy whose process is lost is skipped from then on;
  // when none is left, Errc::peer_failed naming them all.
  template <class Op>
  void on_live_copies(std::size_t group, bool all, Op&& op) {
    std::string why;
    bool done = false;
    for (std::size_t c = 0; c < copies_ && !(done && !all); ++c) {
      const std::size_t server = group * copies_ + c;
      if (lost_[server].load(std::memory_order_acquire)) continue;
      try {
        op(server);
        done = true;
      } catch (const Error& e) {
        if (e.code() != Errc::peer_failed) throw;
        lost(server, e, why);
      }
    }
    if (!done)
      throw Error(Errc::peer_failed, "far: every copy of server group " + std::to_string(group) + " is lost (" + members(group) + ")" + why);
  }

  void lost(std::size_t server, const Error& e, std::string& why) {
    lost_[server].store(true, std::memory_order_release);
    why += "; process " + std::to_string(inner_->rank_of(server)) + ": " + e.what();
  }
  std::string members(std::size_t group) const {
    std::string text = "processes";
    for (std::size_t c = 0; c < copies_; ++c) text += (c == 0 ? " " : ", ") + std::to_string(inner_->rank_of(group * copies_ + c));
    return text;
  }

  std::unique_ptr<Device> inner_;
  std::size_t copies_;
  std::unique_ptr<std::atomic<bool>[]> lost_;  // per inner server: once lost, never asked again
};

}  // namespace

std::unique_ptr<Device> make_replicated(std::unique_ptr<Device> inner, std::size_t copies) {
  if (inner == nullptr || copies == 0 || inner->servers() % copies != 0)
    throw Error(Errc::invalid_argument, "far: replication " + std::to_string(copies) + " needs a number of servers that divides by it (" +
                                            std::to_string(inner == nullptr ? 0 : inner->servers()) + " servers)");
  if (copies == 1) return inner;
  return std::make_unique<ReplicatedDevice>(std::move(inner), copies);
}

}  // namespace rdmx::far
