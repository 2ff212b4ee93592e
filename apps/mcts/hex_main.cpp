// rdmx-hex: a Hex engine on rdmx's distributed MCTS.
//   scripts/run --tls shm -np 2 build/apps/mcts/rdmx-hex --rdmx-threads=2 --seconds 2
// Layout: processes from the launcher (-np), worker threads per process from
// --rdmx-threads=T (or RDMX_THREADS / RDMX_LAYOUT). Process 0 thinks and
// talks; the other processes only serve the search.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "mcts/gtp.hpp"
#include "mcts/hex.hpp"
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
  --parallelism P             tree (default), root, leaf or sequential
  --aggregation trad|ovfl     how tree calls are batched (default trad)
  --c C                       UCB exploration constant (default 0.8)
  --playouts K                random playouts per leaf (default 16)
  --inflight W                rollouts in flight per thread (default 4)
  --inflight-floor F          but at least F in the whole job (default 16)
  --phase N                   rollouts per phase per thread (default 4096)
  --hash-owner                place a child on the thread its Zobrist hash names
  --local-calls               use calls between threads of one process too
  --seed N                    random seed (default 1)
  --quiet                     no progress lines
rdmx options: --rdmx-threads=T (threads per process), see docs/mcts.md)";

struct Args {
  std::string mode = "think", moves;
  int size = 11;
  Budget budget;
  SearchOptions search;
  bool quiet = false;
};

Args parse(int argc, char** argv) {
  Args a;
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
    } else if (o == "--aggregation") {
      const std::string v = value(i);
      if (v != "trad" && v != "ovfl") throw std::invalid_argument("--aggregation: trad or ovfl, not " + v);
      a.search.aggregation = v == "trad" ? rdmx::Aggregation::trad : rdmx::Aggregation::ovfl;
    } else if (o == "--c") {
      a.search.c = number(i);
    } else if (o == "--playouts") {
      a.search.playouts = static_cast<std::uint32_t>(number(i));
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
    } else if (o == "--quiet") {
      a.quiet = true;
    } else {
      throw std::invalid_argument("unknown option " + o + " (--help lists them)");
    }
  }
  if (a.budget.seconds == 0 && a.budget.rollouts == 0) a.budget.seconds = 2;
  return a;
}

Hex position_after(const Args& a) {
  Hex h(a.size);
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

Engine<Hex>::Result think(Engine<Hex>& engine, const Hex& h, const Args& a) {
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
  return engine.search(h, a.budget, progress);
}

void print_result(const Hex& h, const Engine<Hex>::Result& r, const rdmx::Job& job) {
  std::printf("%s plays %s: win rate %.1f%%, %llu rollouts in %.2f s = %.0f rollouts/s, "
              "%.0f (completions + visits)/s, %llu nodes, %llu calls between threads (%s)\n",
              color(h.to_move()), h.move_name(r.best).c_str(), 100 * r.win_rate,
              static_cast<unsigned long long>(r.rollouts), r.seconds, r.rollouts_per_second(), r.steps_per_second(),
              static_cast<unsigned long long>(r.nodes), static_cast<unsigned long long>(r.remote_calls),
              job.describe().c_str());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    rdmx::Job job(argc, argv);
    const Args a = parse(argc, argv);
    const Hex start = position_after(a);  // bad --moves fail in every process, before the job starts
    Engine<Hex> engine(a.search);
    job.run([&](rdmx::ThreadId me) {
      engine.run(me, [&] {
        if (a.mode == "gtp") {
          Engine<Hex>::Result last;
          GtpSession gtp([&](const Hex& h) -> std::optional<Hex::Move> {
            last = engine.search(h, a.budget);
            if (!a.quiet) report(h, last, "");
            return last.best;
          }, "rdmx-hex", "0.1", a.size);
          gtp.run(std::cin, std::cout);
          return;
        }
        Hex h = start;
        if (a.mode == "think") {
          std::printf("%s\n%s to move; %s parallelism, %u threads in %u processes\n", h.board_text().c_str(),
                      color(h.to_move()), to_string(a.search.parallelism), job.total_threads(), job.size());
          print_result(h, think(engine, h, a), job);
          return;
        }
        while (!h.terminal()) {  // selfplay
          const auto r = think(engine, h, a);
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
