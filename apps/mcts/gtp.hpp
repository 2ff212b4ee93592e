// A Go Text Protocol (version 2) session for Hex, as spoken by HexGui and
// MoHex, so that a search can be driven by a GUI or played against other
// programs. Colours are b/black/w/white; moves are HexGui cell names ("c5").
#pragma once
#include <functional>
#include <iosfwd>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "mcts/hex.hpp"

namespace rdmx::mcts {

// Called for genmove: returns the move to play for position.to_move(), or std::nullopt to resign.
using GenMove = std::function<std::optional<Hex::Move>(const Hex& position)>;

class GtpSession {
 public:
  GtpSession(GenMove genmove, std::string name, std::string version, int board_size = 11);

  // One command line -> the full response ("=id result\n\n" or "?id error\n\n"),
  // or "" for a blank or comment line, which GTP answers with nothing.
  std::string execute(std::string_view line);
  // Executes commands from in until quit or end of input, flushing each response.
  void run(std::istream& in, std::ostream& out);

  bool quit() const noexcept { return quit_; }
  const Hex& position() const noexcept { return position_; }

 private:
  using Args = std::span<const std::string_view>;
  struct Command {
    std::string_view name;
    std::string (*respond)(GtpSession&, Args);  // a failure response is thrown as GtpError (gtp.cpp)
  };
  static std::span<const Command> commands();

  GenMove genmove_;
  std::string name_, version_;
  Hex position_;
  std::vector<Hex> history_;  // the positions before each play, for undo
  bool quit_ = false;
};

}  // namespace rdmx::mcts
