// rdmx-hex: a Hex engine on rdmx's distributed MCTS.
//   scripts/run --tls shm -np 2 build/apps/mcts/rdmx-hex --rdmx-threads=2 --seconds 2
// Layout: processes from the launcher (-np), worker threads per process from
// --rdmx-threads=T (or RDMX_THREADS / RDMX_LAYOUT). Process 0 thinks and
// talks; the other processes only serve the search.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "mcts/gtp.hpp"
#include "mcts/hex.hpp"
#include "mcts/hex_options.hpp"
#include "mcts/search.hpp"

namespace {
using namespace rdmx::mcts;

constexpr const char* usage = R"(usage: rdmx-hex [options]      (run it through scripts/run or mpirun)
  --mode think|selfplay|gtp   search one position (default), play a game against itself,
                              or speak GTP on stdin/stdout
  --size N                    board size, 1..19 (default 11)
  --moves "a1 b2 ..."         think: moves played before the search
  --seconds S                 time per move (default 2 unless --rollouts is given)
  --rollouts R                rollouts per move
  --parallelism P             tree (default; sequential in a one-thread job), root, leaf or sequential
  --aggregation trad|ovfl     how tree calls are batched (default trad)
  --knowledge LIST            what the engine knows, a comma list of
                                bridge      playouts answer an intrusion into a bridge
                                edge        ... and into a bridge to the edge
                                early-win   playouts stop when a chain connects
                                rave        AMAF/RAVE statistics in the tree
                                prior       priors from patterns for new moves
                              or all (the default: bridge,edge,rave,prior) or none
  --c C                       exploration constant (default 0.8; 0.05 with rave or prior)
  --rave-equivalence K        games at which RAVE and a move's own value weigh alike (default 1000)
  --prior-games G             games a prior counts for (default 32)
  --first-play F              value of a move nothing is known of, with rave or prior (default 1)
  --virtual-loss V            rollouts' worth of losses a rollout in flight counts for (default 1)
  --amaf-batch B              with rave: a thread adds a busy node's AMAF counts once every B
                                rollouts (default 16; 1: every rollout)
  --final visits|mean         the move played: most visited (default) or highest win rate
  --swap                      the swap rule (GTP: param_game allow_swap 0|1 changes it)
  --resign R                  resign when the best move wins less than R (default 0: never)
  --playouts K                playouts per leaf (default 16; 4 with rave or prior)
  --inflight W                rollouts in flight per thread (default 4)
  --inflight-floor F          but at least F in the whole job (default 16)
  --phase N                   rollouts per phase per thread (default 4096)
  --hash-owner                place a child on the thread its Zobrist hash names
  --spread-depth D|all        nodes deeper than D stay in their parent's process (default 2;
                                all: every node on any thread of the job)
  --rings-over-tcp            calls to a process reached over TCP through the one-sided rings
                                too, not as send-based calls
  --spread-leaves             simulate a new leaf on a random thread of its process, not on
                                the thread that made it
  --local-calls               use calls between threads of one process too
  --seed N                    random seed (default 1)
  --quiet                     no progress lines
rdmx options: --rdmx-threads=T (threads per process), see docs/mcts.md)";

struct Args {
  std::string mode = "think", moves;
  int size = 11;
  Budget budget;
  SearchOptions search;
  std::uint8_t playouts_knowledge = 0;  // Hex's flags, carried by every position searched
  bool swap = false;
  double resign = 0;
  bool quiet = false;
};

Args parse(int argc, char** argv) {
  Args a;
  std::string knowledge = "all";
  bool parallelism_given = false;
  HexKnowledge::Given given;
  auto value = [&](int& i) -> std::string {
    if (i + 1 >= argc) throw std::invalid_argument(std::string(argv[i]) + " needs a value");
    return argv[++i];
  };
  auto number = [&](int& i) {
    const std::string name = argv[i], v = value(i);
    std::size_t used = 0;
    double d = 0;
    try {
      d = std::stod(v, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != v.size() || !(d >= 0) || !std::isfinite(d)) throw std::invalid_argument(name + ": not a number: " + v);
    return d;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string o = argv[i];
    if (o == "--help" || o == "-h") {
      std::puts(usage);
      std::exit(0);
    } else if (o == "--mode") {
      a.mode = value(i);
      if (a.mode != "think" && a.mode != "selfplay" && a.mode != "gtp")
        throw std::invalid_argument("--mode: think, selfplay or gtp, not " + a.mode);
    } else if (o == "--size") {
      a.size = static_cast<int>(number(i));
    } else if (o == "--moves") {
      a.moves = value(i);
    } else if (o == "--seconds") {
      a.budget.seconds = number(i);
    } else if (o == "--rollouts") {
      a.budget.rollouts = static_cast<std::uint64_t>(number(i));
    } else if (o == "--parallelism") {
      a.search.parallelism = parse_parallelism(value(i));
      parallelism_given = true;
    } else if (o == "--aggregation") {
      const std::string v = value(i);
      if (v != "trad" && v != "ovfl") throw std::invalid_argument("--aggregation: trad or ovfl, not " + v);
      a.search.aggregation = v == "trad" ? rdmx::Aggregation::trad : rdmx::Aggregation::ovfl;
    } else if (o == "--c") {
      a.search.c = number(i);
      given.c = true;
    } else if (o == "--knowledge") {
      knowledge = value(i);
    } else if (o == "--rave-equivalence") {
      a.search.rave_equivalence = number(i);
    } else if (o == "--prior-games") {
      a.search.prior_games = static_cast<std::uint32_t>(number(i));
      given.prior_games = true;
    } else if (o == "--first-play") {
      a.search.first_play = number(i);
    } else if (o == "--virtual-loss") {
      a.search.virtual_loss = static_cast<std::uint32_t>(number(i));
    } else if (o == "--spread-leaves") {
      a.search.spread_leaves = true;
    } else if (o == "--amaf-batch") {
      a.search.amaf_batch = static_cast<std::uint32_t>(number(i));
    } else if (o == "--final") {
      a.search.final_choice = parse_final_choice(value(i));
    } else if (o == "--swap") {
      a.swap = true;
    } else if (o == "--resign") {
      a.resign = number(i);
    } else if (o == "--playouts") {
      a.search.playouts = static_cast<std::uint32_t>(number(i));
      given.playouts = true;
    } else if (o == "--inflight") {
      a.search.inflight = static_cast<std::uint32_t>(number(i));
    } else if (o == "--inflight-floor") {
      a.search.inflight_floor = static_cast<std::uint32_t>(number(i));
    } else if (o == "--phase") {
      a.search.phase = static_cast<std::uint32_t>(number(i));
    } else if (o == "--seed") {
      a.search.seed = static_cast<std::uint64_t>(number(i));
    } else if (o == "--hash-owner") {
      a.search.hash_owner = true;
    } else if (o == "--local-calls") {
      a.search.local_calls = true;
    } else if (o == "--spread-depth") {
      if (i + 1 < argc && std::string(argv[i + 1]) == "all") {
        a.search.spread_depth = SearchOptions::no_spread_limit;
        ++i;
      } else {
        a.search.spread_depth = static_cast<std::uint32_t>(std::min(number(i), 65535.0));  // deeper than any tree
      }
    } else if (o == "--rings-over-tcp") {
      a.search.rings_over_tcp = true;
    } else if (o == "--quiet") {
      a.quiet = true;
    } else {
      throw std::invalid_argument("unknown option " + o + " (--help lists them)");
    }
  }
  if (a.budget.seconds == 0 && a.budget.rollouts == 0) a.budget.seconds = 2;
  // One thread has no other to keep busy: the window of rollouts in flight
  // that tree parallelism keeps would only make it search with results
  // missing. The same tree, one rollout at a time, is the sequential search.
  if (!parallelism_given && rdmx::Job::current().total_threads() == 1) a.search.parallelism = Parallelism::sequential;
  const HexKnowledge k = HexKnowledge::parse(knowledge);
  a.playouts_knowledge = k.playouts;
  k.apply(a.search, given);
  Engine<Hex>::check_knowledge(a.search);
  return a;
}

Hex position_after(const Args& a) {
  Hex h(a.size);
  h.set_knowledge(a.playouts_knowledge);
  std::istringstream in(a.moves);
  for (std::string m; in >> m;) {
    const auto move = h.parse_move(m);
    if (!move) throw std::invalid_argument("--moves: not a cell of a " + std::to_string(a.size) + "x" + std::to_string(a.size) + " board: " + m);
    if (h.terminal()) throw std::invalid_argument("--moves: the game is over before " + m);
    if (h.stone(*move) != Hex::empty) throw std::invalid_argument("--moves: " + m + " is taken");
    h.play(*move);
  }
  return h;
}

const char* color(Player p) { return p == Hex::black ? "black" : "white"; }

void report(const Hex& h, const Engine<Hex>::Result& r, const char* prefix) {
  std::fprintf(stderr, "%s%7.2f s  %9llu rollouts  %8.0f rollouts/s  best %s %5.1f%%", prefix, r.seconds,
               static_cast<unsigned long long>(r.rollouts), r.rollouts_per_second(), h.move_name(r.best).c_str(),
               100 * r.win_rate);
  for (std::size_t i = 1; i < r.moves.size() && i < 3; ++i)
    std::fprintf(stderr, "  %s %.1f%%", h.move_name(r.moves[i].move).c_str(), 100.0 * r.moves[i].wins / r.moves[i].visits);
  std::fprintf(stderr, "\n");
}

Engine<Hex>::Result think(Engine<Hex>& engine, const Hex& h, const Args& a, Budget budget) {
  Engine<Hex>::Progress progress;
  auto last = std::chrono::steady_clock::now();
  if (!a.quiet)
    progress = [&](const Engine<Hex>::Result& r) {
      // At most a few lines a second, however short the phases are.
      const auto now = std::chrono::steady_clock::now();
      if (now - last < std::chrono::milliseconds(500)) return;
      last = now;
      report(h, r, "  ");
    };
  return engine.search(h, budget, progress);
}

// The swap rule, for the engine as the second player: swapping gives it the
// first stone mirrored, with the opponent to move. Both positions are
// searched (half the time each); it swaps if the opponent's best reply to
// the swapped stone wins less for the opponent than this side's best move wins here.
MoveChoice choose_with_swap(Engine<Hex>& engine, const Hex& h, const Args& a, Budget budget) {
  Budget half = budget;
  if (half.seconds > 0) half.seconds /= 2;
  if (half.rollouts > 0) half.rollouts = std::max<std::uint64_t>(1, half.rollouts / 2);
  const auto stay = think(engine, h, a, half);
  Hex swapped(h.size());
  swapped.set_knowledge(h.knowledge());
  swapped.place(h.mirror(h.last_move()), h.to_move());
  const auto after = think(engine, swapped, a, half);
  if (!a.quiet)
    std::fprintf(stderr, "swap: %.1f%% by playing %s, %.1f%% by swapping\n", 100 * stay.win_rate,
                 h.move_name(stay.best).c_str(), 100 * (1 - after.win_rate));
  return 1 - after.win_rate > stay.win_rate ? MoveChoice::swap_pieces() : MoveChoice::at(stay.best);
}

// The first move of a game the opponent may swap: the move whose win rate is
// nearest to even among those searched well (a fifth of the best's visits),
// so that neither keeping nor swapping it gives the opponent much.
Hex::Move balanced_opening(const Engine<Hex>::Result& r) {
  Hex::Move best = r.best;
  double balance = -1;
  for (const auto& m : r.moves) {
    if (m.visits * 5 < r.moves.front().visits) continue;
    const double rate = double(m.wins) / m.visits, b = std::min(rate, 1 - rate);
    if (b > balance) balance = b, best = m.move;
  }
  return best;
}

void print_result(const Hex& h, const Engine<Hex>::Result& r, const rdmx::Job& job) {
  std::printf("%s plays %s: win rate %.1f%%, %llu rollouts in %.2f s = %.0f rollouts/s, "
              "%.0f (completions + visits)/s, %llu nodes, depth %u (mean %.1f), %llu calls between threads (%s)\n",
              color(h.to_move()), h.move_name(r.best).c_str(), 100 * r.win_rate,
              static_cast<unsigned long long>(r.rollouts), r.seconds, r.rollouts_per_second(), r.steps_per_second(),
              static_cast<unsigned long long>(r.nodes), r.max_depth, r.mean_depth,
              static_cast<unsigned long long>(r.remote_calls), job.describe().c_str());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    // An engine mostly waits for its opponent: its idle threads sleep on
    // their network workers instead of polling (docs/mcts-hex.md, "GTP").
    // --rdmx-progress or RDMX_PROGRESS choose otherwise.
    setenv("RDMX_PROGRESS", "block", 0);
    rdmx::Job job(argc, argv);
    const Args a = parse(argc, argv);
    const Hex start = position_after(a);  // bad --moves fail in every process, before the job starts
    Engine<Hex> engine(a.search);
    job.run([&](rdmx::ThreadId me) {
      engine.run(me, [&] {
        if (a.mode == "gtp") {
          auto genmove = [&](const Hex& position, const MoveRequest& request) {
            Hex h = position;
            h.set_knowledge(a.playouts_knowledge);
            Budget budget = a.budget;
            if (request.seconds > 0) budget = Budget{0, request.seconds};
            if (request.may_swap) return choose_with_swap(engine, h, a, budget);
            const auto r = think(engine, h, a, budget);
            if (!a.quiet) report(h, r, "");
            if (r.win_rate < a.resign) return MoveChoice::resignation();
            return MoveChoice::at(request.opponent_may_swap ? balanced_opening(r) : r.best);
          };
          auto analyze = [&](const Hex& position, double seconds) {
            Hex h = position;
            h.set_knowledge(a.playouts_knowledge);
            const auto r = engine.search(h, seconds > 0 ? Budget{0, seconds} : a.budget);
            std::vector<MoveStats> moves;
            for (const auto& m : r.moves) moves.push_back({m.move, m.visits, double(m.wins) / m.visits});
            return moves;
          };
          GtpSession gtp(genmove, "rdmx-hex", "0.2", a.size, analyze);
          gtp.set_swap(a.swap);
          gtp.run(std::cin, std::cout);
          return;
        }
        Hex h = start;
        if (a.mode == "think") {
          std::printf("%s\n%s to move; %s parallelism, %u threads in %u processes\n", h.board_text().c_str(),
                      color(h.to_move()), to_string(a.search.parallelism), job.total_threads(), job.size());
          print_result(h, think(engine, h, a, a.budget), job);
          return;
        }
        while (!h.terminal()) {  // selfplay
          const auto r = think(engine, h, a, a.budget);
          print_result(h, r, job);
          h.play(r.best);
          std::printf("%s\n", h.board_text().c_str());
        }
        std::printf("%s wins after %d moves\n", color(h.winner()), h.moves_played());
      });
    });
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rdmx-hex: %s\n", e.what());
    return 1;
  }
}
