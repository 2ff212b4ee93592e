// The in-process device with a hook in every write-back (a slow network,
// or a call handler that progress runs while the write waits; none: plain),
// whose servers can be lost: then every operation on them fails with
// Errc::peer_failed, as a dead process's would. It counts the reads and
// writes each server got.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "rdmx/core/error.hpp"
#include "rdmx/far/device.hpp"

namespace rdmx::far::testing {

class HookedDevice final : public Device {
 public:
  explicit HookedDevice(std::function<void()> on_write, std::size_t servers = 1, std::size_t bytes = 8 << 20)
      : inner_(make_local_device(servers, bytes)), on_write_(std::move(on_write)), lost_(servers), reads_(servers), writes_(servers) {}
  void kill(std::size_t server) { lost_.at(server).store(true); }
  void revive(std::size_t server) { lost_.at(server).store(false); }
  std::uint64_t reads(std::size_t server) const { return reads_.at(server).load(); }
  std::uint64_t writes(std::size_t server) const { return writes_.at(server).load(); }
  const char* name() const noexcept override { return "hooked"; }
  std::size_t servers() const noexcept override { return inner_->servers(); }
  std::uint64_t region_bytes(std::size_t server) const override { return inner_->region_bytes(server); }
  std::uint32_t rank_of(std::size_t server) const override { return inner_->rank_of(server); }
  void read(std::size_t server, std::uint64_t offset, void* local, std::size_t bytes) override {
    check_alive(server);
    ++reads_.at(server);
    inner_->read(server, offset, local, bytes);
  }
  void write(std::size_t server, std::uint64_t offset, const void* local, std::size_t bytes) override {
    check_alive(server);
    ++writes_.at(server);
    inner_->write(server, offset, local, bytes);  // the transfer's reads of the frame
    if (on_write_) on_write_();                   // then its wait
  }
  void compute(std::size_t server, const Offload& work) override {
    check_alive(server);
    inner_->compute(server, work);
  }
  bool computes() const noexcept override { return inner_->computes(); }

 private:
  void check_alive(std::size_t server) const {
    if (lost_.at(server).load()) throw Error(Errc::peer_failed, "injected: server " + std::to_string(server) + " is lost");
  }
  std::unique_ptr<Device> inner_;
  std::function<void()> on_write_;
  std::vector<std::atomic<bool>> lost_;
  std::vector<std::atomic<std::uint64_t>> reads_, writes_;
};

}  // namespace rdmx::far::testing
