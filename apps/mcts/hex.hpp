// The game of Hex on an n x n rhombus of hexagonal cells (1 <= n <= 19).
// Black (player 0) moves first and connects the top row to the bottom row;
// white (player 1) connects the left column to the right column. The cell at
// row r, column c is the move r * n + c, named as in HexGui: column letter
// then row number from 1 ("a1" is the top-left corner, "c5" is column 3,
// row 5). The neighbours of (r, c) are (r-1, c), (r-1, c+1), (r, c-1),
// (r, c+1), (r+1, c-1) and (r+1, c).
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "mcts/game.hpp"

namespace rdmx::mcts {

namespace hex_detail {
// Zobrist keys from splitmix64, fixed at compile time so that every process
// hashes alike: key 2 * cell + colour for a stone, the last one for white to move.
consteval std::array<std::uint64_t, 2 * 361 + 1> zobrist_keys() {
  std::array<std::uint64_t, 2 * 361 + 1> keys{};
  std::uint64_t seed = 0x243F6A8885A308D3ull;
  for (auto& key : keys) {
    seed += 0x9E3779B97F4A7C15ull;
    std::uint64_t z = seed;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    key = z ^ (z >> 31);
  }
  return keys;
}
}  // namespace hex_detail

class Hex {
 public:
  using Move = std::uint16_t;
  static constexpr int max_size = 19;
  static constexpr std::size_t max_moves = max_size * max_size;
  static constexpr Player black = 0;
  static constexpr Player white = 1;
  static constexpr Player empty = 2;  // stone() of an empty cell

  // Throws std::invalid_argument unless 1 <= size <= max_size.
  explicit Hex(int size = 11);

  int size() const noexcept { return size_; }
  Player to_move() const noexcept { return to_move_; }
  Player stone(Move move) const noexcept { return cells_[move]; }
  int moves_played() const noexcept { return moves_; }  // stones on the board
  bool terminal() const noexcept { return winner_ != empty; }
  Player winner() const noexcept { return winner_; }
  std::uint64_t hash() const noexcept { return hash_; }

  // The empty cells, or none once the game is over.
  std::size_t legal_moves(std::span<Move> out) const noexcept;
  // Places a stone for the player to move on an empty cell of a game not over.
  void play(Move move) noexcept { place(move, to_move_); }
  // Places a stone of either colour (set-up moves); then the other colour is to move.
  void place(Move move, Player player) noexcept;
  void set_to_move(Player player) noexcept;

  // Fills every empty cell at random, colouring them alternately starting
  // with the side to move, as a random game played to the very end would.
  Hex random_fill(Rng& rng) const noexcept;
  Player playout(Rng& rng) const noexcept { return terminal() ? winner_ : random_fill(rng).winner_; }

  std::string move_name(Move move) const;
  // Case-insensitive; std::nullopt for anything but a cell of this board.
  std::optional<Move> parse_move(std::string_view text) const;
  // The rhombus, one line per row: '.' empty, 'X' black, 'O' white.
  std::string board_text() const;

  static constexpr std::uint64_t stone_key(Move move, Player player) noexcept { return keys_[2 * move + player]; }
  static constexpr std::uint64_t white_to_move_key() noexcept { return keys_[2 * max_moves]; }

 private:
  // Whether a flood fill over player's stones from the seed stones reaches both of player's edges.
  bool connects(Player player, std::span<const Move> seeds) const noexcept;

  static constexpr auto keys_ = hex_detail::zobrist_keys();
  static_assert(keys_.size() == 2 * max_moves + 1);

  std::uint64_t hash_ = 0;
  std::array<Player, max_moves> cells_;
  std::uint16_t moves_ = 0;
  std::uint8_t size_;
  Player to_move_ = black;
  Player winner_ = empty;  // cached so that terminal() and winner() are O(1)
};

static_assert(Game<Hex>);
static_assert(sizeof(Hex) <= 376);

}  // namespace rdmx::mcts
