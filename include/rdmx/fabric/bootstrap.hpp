// fabric::Bootstrap: the out-of-band channel the launcher gives us (PMIx under
// mpirun or srun), used only at start-up to exchange worker addresses and for
// rare collectives. A program started without a launcher is a one-process job.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace rdmx::fabric {

class Bootstrap {
 public:
  // Connects to the launcher's PMIx server, or falls back to a one-process job.
  static std::unique_ptr<Bootstrap> create();
  virtual ~Bootstrap() = default;

  virtual std::uint32_t rank() const = 0;
  virtual std::uint32_t size() const = 0;
  virtual std::string launcher() const = 0;  // "pmix" or "none"
  // Called while a collective waits: serve calls meanwhile (a peer may be
  // waiting on us), and return true to give up (a member died, so the
  // launcher's fence would never complete).
  using Poll = std::function<bool()>;
  // Every process contributes `mine`; returns all contributions by rank.
  // Throws Errc::peer_failed when `poll` gives up.
  virtual std::vector<std::vector<std::byte>> allgather(std::span<const std::byte> mine, const Poll& poll = {}) = 0;
  // Returns false when `poll` gave up.
  virtual bool barrier(const Poll& poll = {}) = 0;
};

}  // namespace rdmx::fabric
