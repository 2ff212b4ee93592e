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
  // Every process contributes `mine`; returns all contributions by rank.
  virtual std::vector<std::vector<std::byte>> allgather(std::span<const std::byte> mine) = 0;
  virtual void barrier() = 0;
  // A barrier that gives up when `abandon()` turns true (a member died: the
  // launcher's fence would never complete). Returns whether it completed.
  virtual bool barrier_unless(const std::function<bool()>& abandon) = 0;
};

}  // namespace rdmx::fabric
