// rdmx-bench-mcts-match: strength, measured as routinely as rollouts/s. A GTP
// referee that plays rdmx-hex configurations against each other, each a job
// of its own (PxT: processes x threads, and any rdmx-hex options), at equal
// time per move, colours alternated, and reports the first configuration's
// wins with a 95 % (Wilson) interval: one JSON line per pairing, progress
// lines on stderr during the match. Another GTP program plays too, as
// "cmd:COMMAND LINE|SETUP COMMAND|..." (its own time setting among them).
//
//   rdmx-bench-mcts-match --games 100 --seconds 1 "1x2" "1x1" "2x1" "1x1"
//
// Each pairing plays games in pairs from one random opening (a few random
// stones), once with each colour, which cancels the first player's
// advantage. The referee keeps its own board: a move that is not legal, a
// failure response, a timeout or an engine that dies loses the game, and is
// counted as an error; at the end of every game both engines' final_score
// must name the referee's winner. scripts/bench mcts match runs it.
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "json.hpp"
#include "mcts/hex.hpp"

extern char** environ;

using namespace rdmx;
using namespace rdmx::mcts;

namespace {

constexpr const char* usage = R"(usage: rdmx-bench-mcts-match [options] A B [A B ...]
  A, B               rdmx-hex configurations, paired in order: "PxT [rdmx-hex options]",
                     e.g. "1x2" or "2x1 --knowledge none" (P processes x T threads);
                     none: 1x2 vs 1x1, 2x1 vs 1x1, 1x2 vs 1x2 --knowledge none,
                     1x1 vs 1x1 --knowledge none, 1x2 at 2T vs 1x2.
                     Another GTP engine: "cmd:COMMAND LINE|GTP COMMAND|...", run by
                     /bin/sh, the GTP commands sent once after it starts (its time
                     per move, say: it is not given --seconds or, with --clock,
                     time_settings)
  --games N          games per pairing, an even number (default 100)
  --size S           board size (default 11)
  --seconds T        time per move for both (default 1; an engine's own --seconds wins)
  --clock            give the time with GTP's time_settings (T s of byo-yomi per move)
                     instead of rdmx-hex's --seconds
  --openings K       random stones before the engines play (default 1)
  --seed N           the openings' seed (default 1)
  --tls shm|tcp      the engines' transport (default shm)
  --run PATH         the launcher (default scripts/run)
  --hex PATH         rdmx-hex (default build/apps/mcts/rdmx-hex)
  --timeout S        seconds a move may take before it loses (default 30 + 10 T))";

struct Options {
  int games = 100, size = 11, openings = 1;
  double seconds = 1, timeout = 0;
  bool clock = false;
  std::uint64_t seed = 1;
  std::string tls = "shm", run = "scripts/run", hex = "build/apps/mcts/rdmx-hex";
  std::vector<std::string> configs;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
      return argv[++i];
    };
    if (a == "--help" || a == "-h") {
      std::puts(usage);
      std::exit(0);
    } else if (a == "--games") {
      o.games = std::stoi(next());
    } else if (a == "--size") {
      o.size = std::stoi(next());
    } else if (a == "--seconds") {
      o.seconds = std::stod(next());
    } else if (a == "--clock") {
      o.clock = true;
    } else if (a == "--openings") {
      o.openings = std::stoi(next());
    } else if (a == "--seed") {
      o.seed = std::stoull(next());
    } else if (a == "--tls") {
      o.tls = next();
    } else if (a == "--run") {
      o.run = next();
    } else if (a == "--hex") {
      o.hex = next();
    } else if (a == "--timeout") {
      o.timeout = std::stod(next());
    } else if (a.rfind("--", 0) == 0) {
      throw std::invalid_argument("unknown option " + a + " (--help lists them)");
    } else {
      o.configs.push_back(a);
    }
  }
  if (o.games < 2 || o.games % 2 != 0) throw std::invalid_argument("--games: an even number, at least 2");
  if (o.openings < 0 || o.openings > o.size * o.size / 2) throw std::invalid_argument("--openings: too many stones");
  if (!(o.seconds > 0)) throw std::invalid_argument("--seconds: a positive time");
  if (o.configs.empty()) {
    // The engine's standard pairings: threads, processes, the whole engine
    // and its knowledge against plain random playouts, and twice the time.
    char twice[64];
    std::snprintf(twice, sizeof twice, "1x2 --seconds %g", 2 * o.seconds);
    o.configs = {"1x2", "1x1", "2x1", "1x1", "1x2", "1x2 --knowledge none", "1x1", "1x1 --knowledge none",
                 twice, "1x2"};
  }
  if (o.configs.size() % 2 != 0) throw std::invalid_argument("configurations come in pairs (--help)");
  if (o.timeout <= 0) o.timeout = 30 + 10 * o.seconds;
  return o;
}

// 95 % Wilson score interval of `wins` out of `games`.
std::pair<double, double> wilson(int wins, int games) {
  constexpr double z = 1.959964;
  const double n = games, p = double(wins) / n, z2 = z * z;
  const double centre = (p + z2 / (2 * n)) / (1 + z2 / n);
  const double half = z * std::sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n);
  return {std::max(0.0, centre - half), std::min(1.0, centre + half)};
}

// A configuration: "PxT options..." -> processes, threads, options; or
// "cmd:..." -> a command line and its setup commands.
struct Config {
  std::string text;
  int processes = 1, threads = 1;
  std::vector<std::string> options;
  std::string command;  // another program: its command line (empty for rdmx-hex)
  std::vector<std::string> setup;  // GTP commands it gets after it starts
};

Config parse_config(const std::string& text) {
  Config c;
  c.text = text;
  if (text.rfind("cmd:", 0) == 0) {
    std::istringstream in(text.substr(4));
    std::getline(in, c.command, '|');
    for (std::string command; std::getline(in, command, '|');)
      if (command.find_first_not_of(' ') != std::string::npos) c.setup.push_back(command);
    if (c.command.find_first_not_of(' ') == std::string::npos)
      throw std::invalid_argument("configuration '" + text + "' names no command");
    return c;
  }
  std::istringstream in(text);
  std::string layout;
  in >> layout;
  const auto x = layout.find('x');
  std::size_t used_p = 0, used_t = 0;
  try {
    c.processes = std::stoi(layout.substr(0, x), &used_p);
    c.threads = std::stoi(layout.substr(x + 1), &used_t);
  } catch (const std::exception&) {
    used_p = 0;
  }
  if (x == std::string::npos || used_p != x || used_t != layout.size() - x - 1 || c.processes < 1 || c.threads < 1)
    throw std::invalid_argument("configuration '" + text + "' does not start with PxT (processes x threads)");
  for (std::string word; in >> word;) c.options.push_back(word);
  return c;
}

// An engine as a child job, spoken to over pipes.
class Engine {
 public:
  Engine(const Options& o, const Config& c, const std::string& label) : label_(label) {
    std::vector<std::string> args = {"/bin/sh", "-c", c.command};
    if (c.command.empty()) {
      args = {o.run, "--tls", o.tls, "-np", std::to_string(c.processes), o.hex,
              "--rdmx-threads=" + std::to_string(c.threads), "--mode", "gtp", "--size", std::to_string(o.size), "--quiet"};
      if (!o.clock) {
        args.push_back("--seconds");
        args.push_back(std::to_string(o.seconds));
      }
      args.insert(args.end(), c.options.begin(), c.options.end());
    }
    int in[2], out[2];
    if (pipe(in) != 0 || pipe(out) != 0) throw std::runtime_error("pipe: " + std::string(std::strerror(errno)));
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, in[0], 0);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    for (int fd : {in[0], in[1], out[0], out[1]}) posix_spawn_file_actions_addclose(&actions, fd);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int rc = posix_spawnp(&pid_, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    close(in[0]);
    close(out[1]);
    to_ = in[1];
    from_ = out[0];
    if (rc != 0) throw std::runtime_error("cannot start " + args[0] + ": " + std::strerror(rc));
  }
  ~Engine() {
    if (to_ >= 0) close(to_);  // end of input: rdmx-hex leaves, and its job with it
    if (from_ >= 0) close(from_);
    if (pid_ > 0) {
      for (int i = 0; i < 100; ++i) {
        if (waitpid(pid_, nullptr, WNOHANG) == pid_) return;
        usleep(100000);
      }
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
  }
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Sends one command; returns the response's text after "= ", or nullopt
  // with `error` set (a failure response, a timeout, or the engine gone).
  std::optional<std::string> ask(const std::string& command, double timeout, std::string& error) {
    const std::string line = command + '\n';
    if (write(to_, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
      error = label_ + ": cannot send '" + command + "'";
      return std::nullopt;
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout);
    std::size_t end;
    while ((end = buffer_.find("\n\n")) == std::string::npos) {
      const double left = std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count();
      pollfd p{from_, POLLIN, 0};
      if (left <= 0 || poll(&p, 1, static_cast<int>(left * 1000) + 1) == 0) {
        error = label_ + ": no answer to '" + command + "' within " + std::to_string(timeout) + " s";
        return std::nullopt;
      }
      char chunk[4096];
      const ssize_t n = read(from_, chunk, sizeof chunk);
      if (n <= 0) {
        error = label_ + ": the engine left during '" + command + "'";
        return std::nullopt;
      }
      buffer_.append(chunk, static_cast<std::size_t>(n));
    }
    std::string response = buffer_.substr(0, end);
    buffer_.erase(0, end + 2);
    // Launchers may print lines of their own before the engine's first response.
    const auto start = response.find_first_of("=?");
    if (start == std::string::npos) {
      error = label_ + ": '" + response + "' is not a GTP response to '" + command + "'";
      return std::nullopt;
    }
    response.erase(0, start);
    if (response[0] == '?') {
      error = label_ + ": '" + command + "' failed: " + response;
      return std::nullopt;
    }
    return response.size() > 2 ? response.substr(2) : std::string();
  }

 private:
  std::string label_;
  pid_t pid_ = -1;
  int to_ = -1, from_ = -1;
  std::string buffer_;
};

const char* colour_name(Player p) { return p == Hex::black ? "b" : "w"; }

struct GameResult {
  Player winner;
  int moves;
  bool error;
  std::string what;
};

// One game: `engines[p]` plays colour p, from `opening` (stones already on
// both engines' boards).
GameResult play_game(Engine* engines[2], Hex position, const Options& o) {
  const double timeout = o.timeout;
  std::string error;
  auto forfeit = [&](Player p) { return GameResult{other(p), position.moves_played(), true, error}; };
  while (!position.terminal()) {
    const Player mover = position.to_move();
    const auto reply = engines[mover]->ask(std::string("genmove ") + colour_name(mover), timeout, error);
    if (!reply) return forfeit(mover);
    std::string move = *reply;
    for (char& ch : move) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (move == "resign") return {other(mover), position.moves_played(), false, ""};
    const auto cell = position.parse_move(move);
    if (!cell || position.stone(*cell) != Hex::empty) {
      error = "an illegal move from " + std::string(colour_name(mover)) + ": '" + *reply + "'";
      return forfeit(mover);
    }
    position.play(*cell);
    if (!engines[other(mover)]->ask(std::string("play ") + colour_name(mover) + ' ' + move, timeout, error))
      return forfeit(other(mover));
  }
  // Both engines must agree with the referee on who won.
  const std::string expected = position.winner() == Hex::black ? "B+" : "W+";
  for (Player p : {Hex::black, Hex::white}) {
    const auto score = engines[p]->ask("final_score", timeout, error);
    if (!score || *score != expected) {
      if (score) error = "final_score '" + *score + "', the referee saw " + expected;
      return {position.winner(), position.moves_played(), true, error};
    }
  }
  return {position.winner(), position.moves_played(), false, ""};
}

void play_pairing(const Options& o, const Config& a, const Config& b) {
  const auto t0 = std::chrono::steady_clock::now();
  Engine first(o, a, "A (" + a.text + ")"), second(o, b, "B (" + b.text + ")");
  std::string error;
  for (auto [e, c] : {std::pair{&first, &a}, std::pair{&second, &b}}) {
    // Start-up (the launcher, the job's wire-up) takes a while.
    if (!e->ask("name", 120, error) || !e->ask("boardsize " + std::to_string(o.size), o.timeout, error))
      throw std::runtime_error(error);
    for (const std::string& command : c->setup)
      if (!e->ask(command, o.timeout, error)) throw std::runtime_error(error);
  }
  // GTP's clock, for the rdmx-hex engines (another program sets its own time).
  auto clocked = [&](Engine* e) { return o.clock && (e == &first ? a : b).command.empty(); };
  Rng rng(o.seed * 0x9E3779B97F4A7C15ull + 12345);
  int a_wins = 0, a_black_wins = 0, a_white_wins = 0, errors = 0, moves = 0, games = 0;
  std::string last_error;
  Hex opening(o.size);
  std::vector<Hex::Move> opening_moves;
  for (; games < o.games; ++games) {
    // Games in pairs: one opening, A as black then as white.
    if (games % 2 == 0) {
      opening = Hex(o.size);
      opening_moves.clear();
      Hex::Move cells[Hex::max_moves];
      for (int i = 0; i < o.openings && !opening.terminal(); ++i) {
        opening_moves.push_back(cells[rng.below(static_cast<std::uint32_t>(opening.legal_moves(cells)))]);
        opening.play(opening_moves.back());
      }
    }
    const Player a_colour = games % 2 == 0 ? Hex::black : Hex::white;
    Engine* engines[2];
    engines[a_colour] = &first;
    engines[other(a_colour)] = &second;
    bool ready = true;
    for (Engine* e : {&first, &second}) {
      ready = ready && e->ask("clear_board", o.timeout, error);
      for (std::size_t i = 0; ready && i < opening_moves.size(); ++i)
        ready = e->ask(std::string("play ") + colour_name(i % 2 == 0 ? Hex::black : Hex::white) + ' ' +
                           opening.move_name(opening_moves[i]),
                       o.timeout, error)
                    .has_value();
      if (clocked(e) && ready) ready = e->ask("time_settings 0 " + std::to_string(o.seconds) + " 1", o.timeout, error).has_value();
    }
    if (!ready) throw std::runtime_error(error);
    const GameResult r = play_game(engines, opening, o);
    const bool a_won = r.winner == a_colour;
    a_wins += a_won;
    (a_colour == Hex::black ? a_black_wins : a_white_wins) += a_won;
    errors += r.error;
    moves += r.moves;
    if (r.error) last_error = r.what;
    const auto [low, high] = wilson(a_wins, games + 1);
    std::fprintf(stderr, "match %s vs %s: %d/%d games, A won %d (%.1f %%, 95 %% %.1f-%.1f %%); game %d: A (%s) %s in %d moves%s%s\n",
                 a.text.c_str(), b.text.c_str(), games + 1, o.games, a_wins, 100.0 * a_wins / (games + 1), 100 * low,
                 100 * high, games + 1, a_colour == Hex::black ? "black" : "white", a_won ? "won" : "lost", r.moves,
                 r.error ? ", error: " : "", r.error ? r.what.c_str() : "");
    if (r.error && r.what.find("left") != std::string::npos) {
      ++games;
      break;  // an engine is gone: the pairing cannot go on
    }
  }
  const auto [low, high] = wilson(a_wins, games);
  const double p = double(a_wins) / games;
  bench::JsonLine line;
  line.field("bench", "mcts")
      .field("variant", "match")
      .field("a", a.text)
      .field("b", b.text)
      .field("size", o.size)
      .field("seconds_per_move", o.seconds)
      .field("clock", o.clock)
      .field("openings", o.openings)
      .field("tls", o.tls)
      .field("metric", "win_rate")
      .field("value", p)
      .field("games", games)
      .field("a_wins", a_wins)
      .field("b_wins", games - a_wins)
      .field("a_wins_as_black", a_black_wins)
      .field("a_wins_as_white", a_white_wins)
      .field("win_rate", p)
      .field("ci95_low", low)
      .field("ci95_high", high)
      // The rating difference that win rate means (logistic, 400 per decade of odds).
      .field("elo", p > 0 && p < 1 ? -400 * std::log10(1 / p - 1) : std::nan(""))
      .field("mean_moves", double(moves) / games)
      .field("errors", errors)
      .field("wall_s", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  if (!last_error.empty()) line.field("last_error", last_error);
  line.print();
}

}  // namespace

int main(int argc, char** argv) {
  try {
    signal(SIGPIPE, SIG_IGN);  // an engine that dies must not take the referee with it
    const Options o = parse(argc, argv);
    for (std::size_t i = 0; i < o.configs.size(); i += 2)
      play_pairing(o, parse_config(o.configs[i]), parse_config(o.configs[i + 1]));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rdmx-bench-mcts-match: %s\n", e.what());
    return 1;
  }
}
