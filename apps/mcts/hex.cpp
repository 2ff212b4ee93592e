#include "mcts/hex.hpp"

#include <cassert>
#include <stdexcept>
#include <utility>

namespace rdmx::mcts {

namespace {
constexpr int neighbour_offsets[6][2] = {{-1, 0}, {-1, 1}, {0, -1}, {0, 1}, {1, -1}, {1, 0}};
}  // namespace

Hex::Hex(int size) {
  if (size < 1 || size > max_size)
    throw std::invalid_argument("Hex board size must be between 1 and " + std::to_string(max_size) + ", not " +
                                std::to_string(size));
  size_ = static_cast<std::uint8_t>(size);
  cells_.fill(empty);
}

std::size_t Hex::legal_moves(std::span<Move> out) const noexcept {
  if (terminal()) return 0;
  std::size_t count = 0;
  for (int cell = 0; cell < size_ * size_; ++cell)
    if (cells_[cell] == empty) out[count++] = static_cast<Move>(cell);
  return count;
}

void Hex::place(Move move, Player player) noexcept {
  assert(move < size_ * size_ && cells_[move] == empty && !terminal());
  cells_[move] = player;
  hash_ ^= stone_key(move, player);
  ++moves_;
  // Only the group of the new stone changed, so only it can have made a winner.
  if (connects(player, {&move, 1})) winner_ = player;
  set_to_move(other(player));
}

void Hex::set_to_move(Player player) noexcept {
  if (player != to_move_) hash_ ^= white_to_move_key();
  to_move_ = player;
}

Hex Hex::random_fill(Rng& rng) const noexcept {
  Hex full = *this;
  std::array<Move, max_moves> open;
  std::uint32_t count = 0;
  for (int cell = 0; cell < size_ * size_; ++cell)
    if (cells_[cell] == empty) open[count++] = static_cast<Move>(cell);
  // Colouring a random order alternately gives the mover a uniformly random
  // ceil(count / 2) of the cells, so a partial Fisher-Yates shuffle suffices.
  const std::uint32_t mine = (count + 1) / 2;
  for (std::uint32_t i = 0; i < count; ++i) {
    if (i < mine) std::swap(open[i], open[i + rng.below(count - i)]);
    const Player player = i < mine ? to_move_ : other(to_move_);
    full.cells_[open[i]] = player;
    full.hash_ ^= stone_key(open[i], player);
  }
  full.moves_ = static_cast<std::uint16_t>(moves_ + count);
  if (count % 2 == 1) full.set_to_move(other(to_move_));
  // A full board has exactly one winner: black if black connects top to bottom, else white.
  std::array<Move, max_size> top;
  std::size_t seeds = 0;
  for (int col = 0; col < size_; ++col)
    if (full.cells_[col] == black) top[seeds++] = static_cast<Move>(col);
  full.winner_ = full.connects(black, {top.data(), seeds}) ? black : white;
  return full;
}

bool Hex::connects(Player player, std::span<const Move> seeds) const noexcept {
  const int n = size_;
  std::array<bool, max_moves> seen{};
  std::array<Move, max_moves> stack;
  std::size_t top = 0;
  for (Move seed : seeds) {
    seen[seed] = true;
    stack[top++] = seed;
  }
  bool first_edge = false, second_edge = false;
  while (top > 0) {
    const int cell = stack[--top];
    const int row = cell / n, col = cell % n;
    const int across = player == black ? row : col;
    first_edge |= across == 0;
    second_edge |= across == n - 1;
    if (first_edge && second_edge) return true;
    for (const auto& [dr, dc] : neighbour_offsets) {
      const int r = row + dr, c = col + dc;
      if (r < 0 || r >= n || c < 0 || c >= n) continue;
      const int next = r * n + c;
      if (cells_[next] == player && !seen[next]) {
        seen[next] = true;
        stack[top++] = static_cast<Move>(next);
      }
    }
  }
  return false;
}

std::string Hex::move_name(Move move) const {
  return static_cast<char>('a' + move % size_) + std::to_string(move / size_ + 1);
}

std::optional<Hex::Move> Hex::parse_move(std::string_view text) const {
  if (text.size() < 2 || text.size() > 3) return std::nullopt;
  const char letter = text[0] >= 'A' && text[0] <= 'Z' ? static_cast<char>(text[0] - 'A' + 'a') : text[0];
  const int col = letter - 'a';
  if (col < 0 || col >= size_) return std::nullopt;
  int row = 0;
  for (char digit : text.substr(1)) {
    if (digit < '0' || digit > '9') return std::nullopt;
    row = row * 10 + (digit - '0');
  }
  if (text[1] == '0' || row < 1 || row > size_) return std::nullopt;  // "a01" is not a name either
  return static_cast<Move>((row - 1) * size_ + col);
}

std::string Hex::board_text() const {
  // Each row is shifted half a cell right of the one above, which draws the
  // rhombus with the neighbourhood of the hexagonal cells.
  std::string letters;
  for (int col = 0; col < size_; ++col) {
    if (col > 0) letters += ' ';
    letters += static_cast<char>('a' + col);
  }
  std::string text = "   " + letters + '\n';
  for (int row = 0; row < size_; ++row) {
    const std::string number = std::to_string(row + 1);
    text += std::string(static_cast<std::size_t>(row) + 2 - number.size(), ' ') + number + ' ';
    for (int col = 0; col < size_; ++col) {
      const Player p = cells_[row * size_ + col];
      text += p == black ? 'X' : p == white ? 'O' : '.';
      text += ' ';
    }
    text += number + '\n';
  }
  text += std::string(static_cast<std::size_t>(size_) + 3, ' ') + letters + '\n';
  return text;
}

}  // namespace rdmx::mcts
