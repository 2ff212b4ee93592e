// The search tree shared by every MCTS variant: nodes, the per-child
// statistics that selection reads (Seriema 5.3.2: "each node has counters
// associated with each of its children"), UCB, and the wait-free queue that
// hands leaves to simulating threads.
//
// A node lives in the memory of one process and is owned by one thread of
// it. Every field another thread may touch is atomic: the threads of a
// process work on their nodes concurrently (tree parallelism), and visit and
// win counters are updated with relaxed atomics (the virtual loss technique:
// visits are added on the way down, wins on the way back up).
#pragma once
#include <atomic>
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "mcts/game.hpp"
#include "rdmx/fabric/identity.hpp"

namespace rdmx::mcts {

template <Game G>
struct Node;

// Where a node lives: a pointer that is valid in its owner's process.
template <Game G>
struct NodeRef {
  Node<G>* node = nullptr;
  ThreadId owner;
  explicit operator bool() const noexcept { return node != nullptr; }
};

// One move out of a node, with the statistics of the child it leads to.
template <Game G>
struct Slot {
  enum Status : std::uint8_t { unclaimed, creating, ready };
  typename G::Move move{};
  std::atomic<std::uint8_t> status{unclaimed};
  std::atomic<bool> locked{false};  // guards deferred against the child's arrival
  std::uint32_t deferred = 0;       // selections waiting for the child (Seriema's deferred selection)
  std::atomic<std::uint32_t> visits{0};
  std::atomic<std::uint32_t> wins{0};  // playouts won by the player choosing this move
  NodeRef<G> child;                    // set before status becomes ready

  void lock() noexcept {
    while (locked.exchange(true, std::memory_order_acquire))
      while (locked.load(std::memory_order_relaxed)) {
      }
  }
  void unlock() noexcept { locked.store(false, std::memory_order_release); }

  // A selection chose this slot: wait for the child if it is still being
  // created. Returns false when the selection was deferred (it resumes when
  // the child arrives, see attach).
  bool ready_or_defer() noexcept {
    if (status.load(std::memory_order_acquire) == ready) return true;
    lock();
    const bool now = status.load(std::memory_order_acquire) == ready;
    if (!now) ++deferred;
    unlock();
    return now;
  }
  // The child exists at `where`; returns how many deferred selections to resume there.
  std::uint32_t attach(NodeRef<G> where) noexcept {
    lock();
    child = where;
    status.store(ready, std::memory_order_release);
    const std::uint32_t resume = deferred;
    deferred = 0;
    unlock();
    return resume;
  }
};

// The link a node waits in a SimulationQueue with.
struct QueueLink {
  std::atomic<QueueLink*> next{nullptr};
};

template <Game G>
struct Node : QueueLink {
  Node(const G& s, ThreadId own, NodeRef<G> up = {}, std::uint16_t up_slot = 0)
      : state(s), owner(own), parent(up), parent_slot(up_slot) {}

  NodeRef<G> ref() noexcept { return {this, owner}; }

  const G state;
  const ThreadId owner;
  const NodeRef<G> parent;  // null for the root
  const std::uint16_t parent_slot;
  std::atomic<std::uint64_t> visits{0};
  std::atomic<std::uint32_t> next_untried{0};  // slots below it have been claimed for expansion
  std::atomic<std::vector<Slot<G>>*> children{nullptr};  // made by the first selection through the node

  ~Node() { delete children.load(std::memory_order_relaxed); }

  // The node's slots, one per legal move in random order, created on first
  // use (most nodes stay leaves and never pay for them).
  std::vector<Slot<G>>& slots(Rng& rng) {
    if (auto* c = children.load(std::memory_order_acquire)) return *c;
    typename G::Move moves[G::max_moves];
    const std::size_t n = state.legal_moves(moves);
    for (std::size_t i = n; i > 1; --i) std::swap(moves[i - 1], moves[rng.below(static_cast<std::uint32_t>(i))]);
    auto* made = new std::vector<Slot<G>>(n);
    for (std::size_t i = 0; i < n; ++i) (*made)[i].move = moves[i];
    std::vector<Slot<G>>* expected = nullptr;
    if (children.compare_exchange_strong(expected, made, std::memory_order_acq_rel)) return *made;
    delete made;  // another thread was first
    return *expected;
  }
  // Claims an unexpanded slot, or returns nullptr when all are claimed.
  Slot<G>* claim_untried(std::vector<Slot<G>>& s) noexcept {
    if (next_untried.load(std::memory_order_relaxed) >= s.size()) return nullptr;
    const std::uint32_t i = next_untried.fetch_add(1, std::memory_order_relaxed);
    return i < s.size() ? &s[i] : nullptr;
  }
};

// UCB over the claimed slots, counting virtual losses; nullptr if none has
// been visited yet (another thread claimed it but has not counted it).
template <Game G>
Slot<G>* select_ucb(Node<G>& node, std::vector<Slot<G>>& slots, double c) {
  const double log_n = std::log(static_cast<double>(node.visits.load(std::memory_order_relaxed)) + 1.0);
  Slot<G>* best = nullptr;
  double best_score = -1.0;
  for (auto& s : slots) {
    const std::uint32_t v = s.visits.load(std::memory_order_relaxed);
    if (v == 0) continue;
    const double score = s.wins.load(std::memory_order_relaxed) / double(v) + c * std::sqrt(log_n / v);
    if (score > best_score) best_score = score, best = &s;
  }
  return best;
}

// Virtual loss: `playouts` visits counted before their outcome is known.
template <Game G>
void add_visits(Node<G>& node, Slot<G>& slot, std::uint32_t playouts) noexcept {
  node.visits.fetch_add(playouts, std::memory_order_relaxed);
  slot.visits.fetch_add(playouts, std::memory_order_relaxed);
}

// Runs `playouts` random games from state; returns how many player 0 won.
template <Game G>
std::uint32_t simulate(const G& state, std::uint32_t playouts, Rng& rng) {
  std::uint32_t won = 0;
  for (std::uint32_t i = 0; i < playouts; ++i) won += state.playout(rng) == 0;
  return won;
}

// Intrusive multi-producer single-consumer queue of leaves awaiting
// simulation (Vyukov's): push is wait-free (one exchange); the consuming
// thread may briefly see a push half done and finds the leaf on a later pop.
template <Game G>
class SimulationQueue {
 public:
  void push(Node<G>* n) noexcept { push_link(n); }
  // Consumer thread only.
  Node<G>* pop() noexcept {
    QueueLink* tail = tail_;
    QueueLink* next = tail->next.load(std::memory_order_acquire);
    if (tail == &stub_) {
      if (next == nullptr) return nullptr;
      tail_ = tail = next;
      next = next->next.load(std::memory_order_acquire);
    }
    if (next == nullptr) {
      if (tail != head_.load(std::memory_order_acquire)) return nullptr;  // a push is half done
      push_link(&stub_);
      next = tail->next.load(std::memory_order_acquire);
      if (next == nullptr) return nullptr;
    }
    tail_ = next;
    return static_cast<Node<G>*>(tail);
  }

 private:
  void push_link(QueueLink* n) noexcept {
    n->next.store(nullptr, std::memory_order_relaxed);
    head_.exchange(n, std::memory_order_acq_rel)->next.store(n, std::memory_order_release);
  }
  QueueLink stub_;
  std::atomic<QueueLink*> head_{&stub_};
  QueueLink* tail_ = &stub_;
};

}  // namespace rdmx::mcts
