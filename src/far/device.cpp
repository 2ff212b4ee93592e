#include "rdmx/far/device.hpp"

#include <cstring>
#include <string>

#include "rdmx/core/error.hpp"
#include "rdmx/fabric/call.hpp"
#include "served_region.hpp"

namespace rdmx::far {

void Device::check_range(std::size_t server, std::uint64_t offset, std::size_t bytes) const {
  if (server >= servers())
    throw Error(Errc::invalid_argument, "far: server index " + std::to_string(server) + " but there are " +
                                            std::to_string(servers()) + " servers");
  const std::uint64_t size = region_bytes(server);
  if (offset > size || bytes > size - offset)
    throw Error(Errc::invalid_argument, "far: bytes [" + std::to_string(offset) + ", " + std::to_string(offset + bytes) +
                                            ") lie outside the " + std::to_string(size) + "-byte region of server " +
                                            std::to_string(server) + " (process " + std::to_string(rank_of(server)) + ")");
}

namespace {
struct Done final : Device::Reads {
  void finish() override {}
};
}  // namespace

std::unique_ptr<Device::Reads> Device::start_reads(std::vector<Transfer> transfers) {
  for (const Transfer& t : transfers) read(t.server, t.offset, t.local, t.bytes);
  return std::make_unique<Done>();
}

namespace {

// Servers as plain memory of this process: the unit tests' device.
class LocalDevice final : public Device {
 public:
  LocalDevice(std::size_t servers, std::size_t bytes) : bytes_(bytes) {
    for (std::size_t i = 0; i < servers; ++i) regions_.push_back(std::make_unique<std::byte[]>(bytes));
  }
  const char* name() const noexcept override { return "in-process"; }
  std::size_t servers() const noexcept override { return regions_.size(); }
  std::uint64_t region_bytes(std::size_t) const override { return bytes_; }
  std::uint32_t rank_of(std::size_t server) const override { return static_cast<std::uint32_t>(server); }
  void read(std::size_t server, std::uint64_t offset, void* local, std::size_t bytes) override {
    check_range(server, offset, bytes);
    std::memcpy(local, regions_[server].get() + offset, bytes);
  }
  void write(std::size_t server, std::uint64_t offset, const void* local, std::size_t bytes) override {
    check_range(server, offset, bytes);
    std::memcpy(regions_[server].get() + offset, local, bytes);
  }
  // The function runs here, on this thread, over the server's region.
  void compute(std::size_t server, const Offload& work) override {
    check_range(server, 0, 0);
    const fabric::Invoker invoker = fabric::FunctionRegistry::instance().find(work.function);
    if (invoker == nullptr)
      throw Error(Errc::unknown_function, "far: offloaded function " + fabric::FunctionRegistry::instance().name_of(work.function) +
                                              " is not registered");
    fabric::Incoming in;
    in.function = work.function;
    in.closure = work.args.data();
    in.closure_size = work.args.size();
    in.runtime = const_cast<Offload*>(&work);
    in.reply = [](fabric::Incoming& call, const void* result, std::size_t size) {
      const auto* w = static_cast<const Offload*>(call.runtime);
      if (size != w->result_bytes)
        throw Error(Errc::protocol, "far: an offloaded function replied " + std::to_string(size) + " bytes where " +
                                        std::to_string(w->result_bytes) + " were expected");
      std::memcpy(w->result, result, size);
    };
    detail::ServingHere here(regions_[server].get(), bytes_);
    try {
      invoker(in);
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {  // as a server's would arrive
      throw Error(Errc::remote_exception, std::string("far: the offloaded function threw: ") + e.what());
    }
  }

 private:
  std::size_t bytes_;
  std::vector<std::unique_ptr<std::byte[]>> regions_;
};

}  // namespace

std::unique_ptr<Device> make_local_device(std::size_t servers, std::size_t bytes) {
  if (servers == 0) throw Error(Errc::invalid_argument, "far: an in-process device needs at least one server");
  return std::make_unique<LocalDevice>(servers, bytes);
}

}  // namespace rdmx::far
