// The two devices over the job's published regions: one-sided get/put
// (the server's CPU does nothing) and two-sided requests answered by the
// server's service thread (AIFM's TCP device, for comparison).
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <vector>
#include <cstring>
#include <string>
#include <utility>

#include "rdmx/core/error.hpp"
#include "rdmx/fabric/call.hpp"
#include "rdmx/fabric/rma.hpp"
#include "rdmx/far/device.hpp"
#include "rdmx/far/offload.hpp"
#include "served_region.hpp"

namespace rdmx::far {
namespace detail {
namespace {
std::atomic<std::byte*> served_base{nullptr};
std::atomic<std::size_t> served_bytes{0};
thread_local std::span<std::byte> served_here;  // ServingHere
}  // namespace

ServingHere::ServingHere(std::byte* base, std::size_t bytes) noexcept : saved_(std::exchange(served_here, {base, bytes})) {}
ServingHere::~ServingHere() { served_here = saved_; }

void serve(std::byte* base, std::size_t bytes) noexcept {
  served_bytes.store(bytes, std::memory_order_relaxed);
  served_base.store(base, std::memory_order_release);
}
void stop_serving() noexcept { served_base.store(nullptr, std::memory_order_release); }

std::span<std::byte> served(std::uint64_t offset, std::uint64_t bytes) {
  std::byte* base = served_here.empty() ? served_base.load(std::memory_order_acquire) : served_here.data();
  const std::size_t size = served_here.empty() ? served_bytes.load(std::memory_order_relaxed) : served_here.size();
  if (base == nullptr) throw Error(Errc::invalid_argument, "far: this process serves no far-memory region");
  if (offset > size || bytes > size - offset)
    throw Error(Errc::invalid_argument, "far: request for bytes [" + std::to_string(offset) + ", " +
                                            std::to_string(offset + bytes) + ") outside the served region of " +
                                            std::to_string(size) + " bytes");
  return {base + offset, bytes};
}
}  // namespace detail

std::span<std::byte> served_bytes(std::uint64_t offset, std::uint64_t bytes) { return detail::served(offset, bytes); }

namespace {

// Idle polls before a thread waiting for an offloaded computation yields its
// core: some tens of microseconds, longer than a short request takes.
constexpr unsigned offload_wait_spins = 1024;

class JobDevice : public Device {
 public:
  explicit JobDevice(std::vector<RemoteLocator> regions) : regions_(std::move(regions)) {}
  std::size_t servers() const noexcept override { return regions_.size(); }
  std::uint64_t region_bytes(std::size_t server) const override { return regions_.at(server).length; }
  std::uint32_t rank_of(std::size_t server) const override { return regions_.at(server).process; }
  void read(std::size_t server, std::uint64_t offset, void* local, std::size_t bytes) final {
    check_range(server, offset, bytes);
    naming_loss(server, [&] { fetch(server, offset, local, bytes); });
  }
  void write(std::size_t server, std::uint64_t offset, const void* local, std::size_t bytes) final {
    check_range(server, offset, bytes);
    naming_loss(server, [&] { store(server, offset, local, bytes); });
  }
  // Both paths: an offloaded function needs the server's CPU.
  void compute(std::size_t server, const Offload& work) final {
    check_range(server, 0, 0);  // a server that exists
    naming_loss(server, [&] {
      Synchronizer sync;
      fabric::Outgoing call;
      call.destination = ThreadId{regions_[server].process, service_thread};
      call.kind = fabric::CallKind::returning;
      call.function = work.function;
      call.closure = work.args.data();
      call.closure_size = work.args.size();
      call.sync = &sync;
      call.notify = fabric::Notify::consumed;
      // The fabric checks the size of a reply it copies somewhere: an empty
      // one expected gets a place too, so that a reply of any other size is
      // refused (Errc::protocol), as the in-process device refuses it.
      std::byte no_result[1];
      call.result = work.result != nullptr ? work.result : no_result;
      call.result_size = work.result_bytes;
      fabric::send_call(call);
      // The server's service thread works for a while (up to a request's
      // range), unpinned: it may have been placed on this core.
      sync.wait(offload_wait_spins);
    });
  }
  std::unique_ptr<Reads> start_reads(std::vector<Transfer> transfers) final {
    for (const Transfer& t : transfers) check_range(t.server, t.offset, t.bytes);
    const std::size_t first = transfers.empty() ? 0 : transfers.front().server;
    const bool one = std::all_of(transfers.begin(), transfers.end(), [&](const Transfer& t) { return t.server == first; });
    auto reads = std::make_unique<Named>(*this, one ? first : many_servers);
    naming_loss(reads->server, [&] { reads->inner = start_fetches(transfers); });
    return reads;
  }

 protected:
  virtual void fetch(std::size_t server, std::uint64_t offset, void* local, std::size_t bytes) = 0;
  // Every transfer issued; the result's finish() waits for them.
  virtual std::unique_ptr<Reads> start_fetches(std::span<const Transfer> transfers) = 0;
  virtual void store(std::size_t server, std::uint64_t offset, const void* local, std::size_t bytes) = 0;
  std::vector<RemoteLocator> regions_;

 private:
  // Reads whose failures name the lost server, like read()'s.
  struct Named final : Reads {
    Named(JobDevice& d, std::size_t s) : device(d), server(s) {}
    void finish() override {
      if (inner) device.naming_loss(server, [&] { std::exchange(inner, nullptr)->finish(); });
    }
    JobDevice& device;
    std::size_t server;  // or many_servers
    std::unique_ptr<Reads> inner;
  };
  static constexpr std::size_t many_servers = SIZE_MAX;

  // A dead server's error says what it means for far memory. Named only
  // once it failed: every miss goes through here, and building the name
  // (heap allocations) costs a sizable part of a shared-memory miss.
  std::string describe(std::size_t server) const {
    if (server == many_servers) return "one of the servers read from";
    return "server " + std::to_string(server) + " (process " + std::to_string(rank_of(server)) + ")";
  }
  template <class F>
  void naming_loss(std::size_t server, F&& f) {
    try {
      f();
    } catch (const Error& e) {
      if (e.code() != Errc::peer_failed) throw;
      throw Error(Errc::peer_failed, "far: " + describe(server) + " is lost, and its objects with it: " + e.what());
    }
  }
};

class OneSidedDevice final : public JobDevice {
 public:
  using JobDevice::JobDevice;
  const char* name() const noexcept override { return "one-sided"; }
  // Neither allocates: a miss costs little more than the get itself.
  void fetch(std::size_t server, std::uint64_t offset, void* local, std::size_t bytes) override {
    blocking_get(local, regions_[server].slice(offset, bytes));
  }
  void store(std::size_t server, std::uint64_t offset, const void* local, std::size_t bytes) override {
    const RemoteLocator target = regions_[server].slice(offset, bytes);
    post_put(local, target);
    // Remote completion, which also frees `local`: the next read may come
    // from another thread, whose endpoint is not ordered after this one's.
    flush(target.process);
  }
  // Gets in flight, issued unsignaled (no future each: two heap
  // allocations a get); finishing flushes every process they went to,
  // which completes them all, and then throws the first failure.
  struct Gets final : Reads {
    std::vector<std::uint32_t> processes;  // each once
    std::exception_ptr failure;
    ~Gets() override {
      try {
        finish();
      } catch (...) {
      }
    }
    void finish() override {
      for (std::uint32_t process : processes) {
        try {
          flush(process);
        } catch (...) {
          if (!failure) failure = std::current_exception();
        }
      }
      processes.clear();
      if (failure) std::rethrow_exception(std::exchange(failure, nullptr));
    }
  };
  std::unique_ptr<Reads> start_fetches(std::span<const Transfer> transfers) override {
    auto gets = std::make_unique<Gets>();
    try {
      for (const Transfer& t : transfers) {
        const RemoteLocator source = regions_[t.server].slice(t.offset, t.bytes);
        if (std::find(gets->processes.begin(), gets->processes.end(), source.process) == gets->processes.end())
          gets->processes.push_back(source.process);  // before the get: a get that throws may have been issued
        post_get(t.local, source);
      }
    } catch (...) {
      gets->failure = std::current_exception();  // finish() waits for those issued, then throws it
    }
    return gets;
  }
};

// A read request: the server replies with the bytes, which the runtime
// copies into the caller's buffer (the cache frame).
struct ReadRequest {
  std::uint64_t offset;
  std::uint64_t bytes;
};
struct ReadHandler {
  static void invoke(fabric::Incoming& in) {
    ReadRequest request;
    if (in.closure_size != sizeof request) throw Error(Errc::protocol, "far: malformed read request");
    std::memcpy(&request, in.closure, sizeof request);
    std::span<std::byte> bytes = detail::served(request.offset, request.bytes);
    in.reply(in, bytes.data(), bytes.size());
  }
};

class TwoSidedDevice final : public JobDevice {
 public:
  using JobDevice::JobDevice;
  const char* name() const noexcept override { return "two-sided"; }
  void fetch(std::size_t server, std::uint64_t offset, void* local, std::size_t bytes) override {
    Synchronizer sync;
    request(sync, {server, offset, local, bytes});
    sync.wait();
  }
  // Requests under way: their replies land in the frames and count `sync` down.
  struct Requests final : Reads {
    Synchronizer sync;
    std::exception_ptr failure;
    bool waited = false;
    ~Requests() override {
      if (!waited) sync.wait_for(60000);  // what was sent must land (or fail) before the frames are reused
    }
    void finish() override {
      if (waited) return;
      waited = true;
      sync.wait();
      if (failure) std::rethrow_exception(failure);
    }
  };
  std::unique_ptr<Reads> start_fetches(std::span<const Transfer> transfers) override {
    auto requests = std::make_unique<Requests>();
    try {
      for (const Transfer& t : transfers) request(requests->sync, t);
    } catch (...) {
      requests->failure = std::current_exception();
    }
    return requests;
  }
  // Asks the server for t's bytes; its reply lands in t.local and counts `sync` down.
  void request(Synchronizer& sync, const Transfer& t) {
    const ReadRequest request{t.offset, t.bytes};  // relative to the served region
    fabric::Outgoing call;
    call.destination = ThreadId{regions_[t.server].process, service_thread};
    call.kind = fabric::CallKind::returning;
    call.function = fabric::FunctionId<ReadHandler>::value;
    call.closure = &request;
    call.closure_size = sizeof request;
    call.sync = &sync;
    call.notify = fabric::Notify::consumed;
    call.result = t.local;
    call.result_size = t.bytes;
    fabric::send_call(call);
  }
  void store(std::size_t server, std::uint64_t offset, const void* local, std::size_t bytes) override {
    const std::uint64_t at = offset;  // relative to the served region
    Synchronizer sync;
    call_buffer(ThreadId{regions_[server].process, service_thread}, [at](std::span<std::byte> data) {
      std::span<std::byte> target = detail::served(at, data.size());
      std::memcpy(target.data(), data.data(), data.size());
    }, std::span(static_cast<const std::byte*>(local), bytes), when_run(sync));
    sync.wait();
  }
};

}  // namespace

std::unique_ptr<Device> make_device(Path path, std::vector<RemoteLocator> regions) {
  if (regions.empty()) throw Error(Errc::invalid_argument, "far: no server published a region");
  if (path == Path::one_sided) return std::make_unique<OneSidedDevice>(std::move(regions));
  return std::make_unique<TwoSidedDevice>(std::move(regions));
}

}  // namespace rdmx::far
