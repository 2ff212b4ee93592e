// A Go Text Protocol (version 2) session for Hex, as spoken by HexGui, MoHex
// and the referees that run matches between Hex programs, so that a search
// can be driven by a GUI or played against other programs. Colours are
// b/black/w/white; moves are HexGui cell names ("c5"), "swap-pieces" and
// "resign".
#pragma once
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "mcts/hex.hpp"

namespace rdmx::mcts {

// What genmove asks of the engine.
struct MoveRequest {
  double seconds = 0;              // time to think; 0: the engine's own setting (no clock)
  bool may_swap = false;           // the swap rule lets this move be swap-pieces
  bool opponent_may_swap = false;  // the first move of a game with the swap rule
};

// The engine's answer: a cell, swap-pieces or resignation.
struct MoveChoice {
  enum Kind : std::uint8_t { cell, swap, resign };
  Kind kind = resign;
  Hex::Move move = 0;
  static MoveChoice at(Hex::Move m) { return {cell, m}; }
  static MoveChoice swap_pieces() { return {swap, 0}; }
  static MoveChoice resignation() { return {resign, 0}; }
};

using GenMove = std::function<MoveChoice(const Hex& position, const MoveRequest& request)>;

// A root move as an analysis shows it: visits and win rate for the player to move.
struct MoveStats {
  Hex::Move move;
  std::uint64_t visits;
  double win_rate;
};
// Searches position for `seconds` (0: the engine's own setting) and returns
// its root moves, most visited first.
using Analyze = std::function<std::vector<MoveStats>(const Hex& position, double seconds)>;

// GTP's time control (time_settings, time_left): main time, then Canadian
// byo-yomi (a period of time for a number of stones). Both players' clocks
// are kept; the engine's own runs while it thinks, and time_left from a
// referee or GUI corrects it.
class GameClock {
 public:
  // time_settings: no limit when main and byo-yomi time are both 0, or when
  // byo-yomi has time but no stones.
  void settings(double main_seconds, double byo_yomi_seconds, int byo_yomi_stones);
  // time_left: `seconds` of main time (stones 0) or of byo-yomi for `stones`.
  void time_left(Player player, double seconds, int stones);
  bool limited() const noexcept { return limited_; }
  // Seconds to think on the next move of `player` with `empty_cells` left
  // (0 when there is no limit): a share of main time for the moves a game
  // has left plus a byo-yomi stone's share, kept clear of the flag by a margin.
  double budget(Player player, int empty_cells) const;
  // `player` used `seconds` on a move.
  void used(Player player, double seconds);
  // For GTP's time_left with a colour only: "<seconds> <stones>".
  std::string remaining(Player player) const;

 private:
  struct Side {
    double left = 0;  // main time, or the byo-yomi period's when stones > 0
    int stones = 0;   // stones left to play in the byo-yomi period; 0: in main time
  };
  bool limited_ = false;
  double main_ = 0, byo_yomi_ = 0;
  int stones_ = 0;
  Side side_[2];
};

class GtpSession {
 public:
  GtpSession(GenMove genmove, std::string name, std::string version, int board_size = 11, Analyze analyze = {});

  // One command line -> the full response ("=id result\n\n" or "?id error\n\n"),
  // or "" for a blank or comment line, which GTP answers with nothing. No
  // line, however malformed, throws: what the engine throws is a failure response.
  std::string execute(std::string_view line);
  // Executes commands from in until quit or end of input, flushing each response.
  void run(std::istream& in, std::ostream& out);

  bool quit() const noexcept { return quit_; }
  const Hex& position() const noexcept { return position_; }
  // The swap rule: the second player's first move may be swap-pieces.
  void set_swap(bool allowed) noexcept { swap_ = allowed; }
  bool swap() const noexcept { return swap_; }
  const GameClock& clock() const noexcept { return clock_; }
  // Who has won: by connection or by the other's resignation; nullopt while the game goes on.
  std::optional<Player> winner() const noexcept;

 private:
  using Args = std::span<const std::string_view>;
  struct Command {
    std::string_view name;
    std::string (*respond)(GtpSession&, Args);  // a failure response is thrown as GtpError (gtp.cpp)
  };
  static std::span<const Command> commands();
  // What undo restores.
  struct Snapshot {
    Hex position;
    Player resigned;
  };
  void new_game(int size);
  void play(Player color, std::string_view move);
  // The swap rule's move: the first stone moves across the long diagonal and changes colour.
  bool can_swap(Player color) const noexcept;
  void swap_pieces();

  GenMove genmove_;
  Analyze analyze_;
  std::string name_, version_;
  Hex position_;
  Player resigned_ = Hex::empty;  // who resigned, if anyone
  std::vector<Snapshot> history_;  // before each move, for undo
  bool swap_ = false;
  bool quit_ = false;
  GameClock clock_;
};

}  // namespace rdmx::mcts
