// What a user writes to search a game with rdmx's MCTS: a problem
// specification, the only game-specific code the framework needs (no
// communication, memory management or tree code). The framework copies
// states between threads and processes as plain bytes (a new child travels
// inside a call_buffer), so a state must be trivially copyable and
// self-contained: no pointers, no heap.
#pragma once
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>

namespace rdmx::mcts {

// Two players, 0 moves first. Games with more players or draws are outside
// this framework's value model (a rollout is a win or a loss).
using Player = std::uint8_t;
constexpr Player other(Player p) noexcept { return static_cast<Player>(p ^ 1u); }

// xoshiro256**: fast, small state, good enough for random playouts.
class Rng {
 public:
  explicit Rng(std::uint64_t seed = 0x9E3779B97F4A7C15ull) noexcept {
    for (auto& w : s_) {  // splitmix64 expands the seed
      seed += 0x9E3779B97F4A7C15ull;
      std::uint64_t z = seed;
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      w = z ^ (z >> 31);
    }
  }
  std::uint64_t operator()() noexcept {
    const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  // Uniform in [0, n), n > 0 (Lemire's multiply-shift; the bias is < n / 2^64).
  std::uint32_t below(std::uint32_t n) noexcept {
    return static_cast<std::uint32_t>(((*this)() >> 32) * n >> 32);
  }

 private:
  static std::uint64_t rotl(std::uint64_t x, int k) noexcept { return (x << k) | (x >> (64 - k)); }
  std::uint64_t s_[4];
};

// G::Move: trivially copyable move. G::max_moves: a bound on legal moves in
// any state of G (sizes per-node arrays).
template <class G>
concept Game = std::is_trivially_copyable_v<G> && std::is_trivially_copyable_v<typename G::Move> &&
               std::equality_comparable<typename G::Move> &&
               requires(const G& state, G& mutable_state, typename G::Move move, std::span<typename G::Move> out,
                        Rng& rng) {
                 { G::max_moves } -> std::convertible_to<std::size_t>;
                 { state.to_move() } -> std::same_as<Player>;
                 // Writes the legal moves into out (size >= max_moves); returns how many.
                 { state.legal_moves(out) } -> std::same_as<std::size_t>;
                 { mutable_state.play(move) } -> std::same_as<void>;  // a legal move
                 { state.terminal() } -> std::same_as<bool>;
                 { state.winner() } -> std::same_as<Player>;  // only when terminal()
                 { state.hash() } -> std::same_as<std::uint64_t>;  // Zobrist hash of the position
                 // Plays random moves to the end of the game from this state
                 // (left unchanged) and returns the winner.
                 { state.playout(rng) } -> std::same_as<Player>;
               };

}  // namespace rdmx::mcts
