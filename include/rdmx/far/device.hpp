// far::Device: how objects move between the local cache and the servers'
// regions. One interface, several paths: one-sided RDMA get/put (the
// server's CPU is not involved), two-sided requests served by the server's
// service thread, and an in-process device over plain memory for unit tests.
// Offsets are bytes inside a server's region; every device checks them
// against the region before touching the network.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "rdmx/far/config.hpp"
#include "rdmx/transfer/remote_locator.hpp"

namespace rdmx::far {

class Device {
 public:
  virtual ~Device() = default;
  virtual const char* name() const noexcept = 0;
  virtual std::size_t servers() const noexcept = 0;
  virtual std::uint64_t region_bytes(std::size_t server) const = 0;
  // The job rank serving `server` (for messages); the index itself in-process.
  virtual std::uint32_t rank_of(std::size_t server) const = 0;
  // Blocking: on return the bytes are in `local` (read) or in the server's
  // region, visible to every later read from any thread (write).
  virtual void read(std::size_t server, std::uint64_t offset, void* local, std::size_t bytes) = 0;
  virtual void write(std::size_t server, std::uint64_t offset, const void* local, std::size_t bytes) = 0;

  // One object's move for read_many.
  struct Transfer {
    std::size_t server;
    std::uint64_t offset;
    void* local;
    std::size_t bytes;
  };
  // Reads under way (start_reads). finish() returns once every one has
  // ended and throws the first failure; destroying unfinished reads waits
  // for them too (the memory they land in may be reused right after).
  class Reads {
   public:
    virtual ~Reads() = default;
    virtual void finish() = 0;
  };
  // Starts reading them all, with as many in flight at once as the path
  // allows. This default reads them one after the other before returning.
  // On an error, some may have landed.
  virtual std::unique_ptr<Reads> start_reads(std::vector<Transfer> transfers);
  void read_many(std::span<const Transfer> transfers) { start_reads({transfers.begin(), transfers.end()})->finish(); }

  // Compute offload (AIFM's remote agent): `function`, a fabric function id,
  // runs with `args` in the process serving `server`, on its CPU, and reads
  // or changes the region through far::served_bytes (far/offload.hpp). Its
  // reply, `result_bytes` long, lands in `result`. `writes`: it changes the
  // region, so every copy of a replicated server runs it. Blocking; a
  // failure on the server arrives here as an exception.
  struct Offload {
    std::uint64_t function = 0;
    std::span<const std::byte> args;
    void* result = nullptr;
    std::size_t result_bytes = 0;
    bool writes = false;
  };
  virtual void compute(std::size_t server, const Offload& work) = 0;
  // Whether compute() can run work at all; offloaded operations fall back
  // to running here (fetching what they need) on a device that cannot.
  virtual bool computes() const noexcept { return true; }

  // The job reports that `process`, which serves some of this device's
  // servers, has failed. Operations on its servers fail by themselves (the
  // fabric fails whatever waits on the process); a device that keeps
  // copies stops using that process's at once.
  virtual void process_failed(std::uint32_t process) noexcept { (void)process; }

 protected:
  // Throws Errc::invalid_argument unless [offset, offset + bytes) lies in the region.
  void check_range(std::size_t server, std::uint64_t offset, std::size_t bytes) const;
};

// Over the published regions (one RemoteLocator per server, in server order).
std::unique_ptr<Device> make_device(Path path, std::vector<RemoteLocator> regions);
// Every object on `copies` servers: the inner device's servers form groups
// of `copies` consecutive ones, and the result has one server per group.
// Writes go to every live copy; a read falls back to the next copy when one
// fails with Errc::peer_failed. Only when every copy of a group is lost do
// its operations fail (Errc::peer_failed, naming the processes).
std::unique_ptr<Device> make_replicated(std::unique_ptr<Device> inner, std::size_t copies);
// `servers` regions of `bytes` each in this process's memory.
std::unique_ptr<Device> make_local_device(std::size_t servers, std::size_t bytes);

}  // namespace rdmx::far
