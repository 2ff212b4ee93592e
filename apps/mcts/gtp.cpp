#include "mcts/gtp.hpp"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <istream>
#include <ostream>
#include <stdexcept>
#include <utility>

namespace rdmx::mcts {

namespace {

// A failure response for a malformed or impossible command.
struct GtpError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void expect_args(std::span<const std::string_view> args, std::size_t count) {
  if (args.size() != count) throw GtpError("wrong number of arguments");
}

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& ch : out)
    if (ch >= 'A' && ch <= 'Z') ch = static_cast<char>(ch - 'A' + 'a');
  return out;
}

Player parse_color(std::string_view text) {
  const std::string color = lower(text);
  if (color == "b" || color == "black") return Hex::black;
  if (color == "w" || color == "white") return Hex::white;
  throw GtpError("invalid color '" + std::string(text) + "'");
}

int parse_size(std::string_view text) {
  int value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc{} || end != text.data() + text.size()) throw GtpError("boardsize is not an integer");
  if (value < 1 || value > Hex::max_size) throw GtpError("unacceptable size");
  return value;
}

double parse_seconds(std::string_view text) {
  double value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc{} || end != text.data() + text.size() || !std::isfinite(value) || value < 0)
    throw GtpError("time is not a non-negative number of seconds");
  return value;
}

int parse_stones(std::string_view text) {
  int value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc{} || end != text.data() + text.size() || value < 0)
    throw GtpError("stones is not a non-negative integer");
  return value;
}

bool parse_bool(std::string_view text) {
  const std::string value = lower(text);
  if (value == "1" || value == "true" || value == "on") return true;
  if (value == "0" || value == "false" || value == "off") return false;
  throw GtpError("expected 0 or 1, not '" + std::string(text) + "'");
}

std::string percent(double rate) {
  char text[16];
  std::snprintf(text, sizeof text, "%.1f", 100 * rate);
  return text;
}

constexpr std::string_view swap_move = "swap-pieces";

}  // namespace

// ---- GameClock ----------------------------------------------------------------

void GameClock::settings(double main_seconds, double byo_yomi_seconds, int byo_yomi_stones) {
  main_ = main_seconds;
  byo_yomi_ = byo_yomi_seconds;
  stones_ = byo_yomi_stones;
  limited_ = !(main_seconds == 0 && byo_yomi_seconds == 0) && !(byo_yomi_seconds > 0 && byo_yomi_stones == 0);
  for (Side& s : side_) s = main_seconds > 0 || !limited_ ? Side{main_seconds, 0} : Side{byo_yomi_seconds, stones_};
}

void GameClock::time_left(Player player, double seconds, int stones) {
  side_[player] = {seconds, stones};
  // A referee that never sent time_settings still sets the clock this way.
  if (!limited_) limited_ = true;
}

double GameClock::budget(Player player, int empty_cells) const {
  if (!limited_) return 0;
  const Side& s = side_[player];
  double seconds;
  if (s.stones > 0) {
    seconds = s.left / s.stones;
  } else {
    // A game's own moves to come: about a quarter of the empty cells (Hex
    // games end long before the board is full), at least ten.
    const double moves = std::max(10.0, empty_cells / 4.0);
    seconds = s.left / moves;
    if (byo_yomi_ > 0 && stones_ > 0) seconds += byo_yomi_ / stones_;
    else seconds = std::min(seconds, s.left / 2);
  }
  // The margin covers the messages and the search's own stop.
  return std::max(0.01, std::min(0.95 * seconds, seconds - 0.05));
}

void GameClock::used(Player player, double seconds) {
  if (!limited_) return;
  Side& s = side_[player];
  s.left -= seconds;
  if (s.stones > 0) {
    if (--s.stones == 0 && s.left >= 0) s = {byo_yomi_, stones_};  // a new period
  } else if (s.left <= 0 && byo_yomi_ > 0 && stones_ > 0) {
    s = {byo_yomi_, stones_};  // main time is over: byo-yomi begins
  }
}

std::string GameClock::remaining(Player player) const {
  const Side& s = side_[player];
  char text[48];
  std::snprintf(text, sizeof text, "%.3f %d", s.left, s.stones);
  return text;
}

// ---- GtpSession ---------------------------------------------------------------

GtpSession::GtpSession(GenMove genmove, std::string name, std::string version, int board_size, Analyze analyze)
    : genmove_(std::move(genmove)),
      analyze_(std::move(analyze)),
      name_(std::move(name)),
      version_(std::move(version)),
      position_(board_size) {}

std::optional<Player> GtpSession::winner() const noexcept {
  if (position_.terminal()) return position_.winner();
  if (resigned_ != Hex::empty) return other(resigned_);
  return std::nullopt;
}

void GtpSession::new_game(int size) {
  position_ = Hex(size);
  resigned_ = Hex::empty;
  history_.clear();
}

bool GtpSession::can_swap(Player color) const noexcept {
  // The second move of the game, after one stone of the other colour.
  return swap_ && history_.size() == 1 && position_.moves_played() == 1 && resigned_ == Hex::empty &&
         position_.stone(position_.last_move()) == other(color);
}

void GtpSession::swap_pieces() {
  const Hex::Move first = position_.last_move();
  const Player first_colour = position_.stone(first);
  Hex swapped(position_.size());
  swapped.place(position_.mirror(first), other(first_colour));
  history_.push_back({position_, resigned_});
  position_ = swapped;  // the first player moves again
}

void GtpSession::play(Player color, std::string_view text) {
  const std::string move_text = lower(text);
  if (move_text == "resign") {
    history_.push_back({position_, resigned_});
    if (!winner()) resigned_ = color;
    return;
  }
  if (move_text == swap_move) {
    if (!swap_) throw GtpError("swap is not allowed (param_game allow_swap 1 allows it)");
    if (!can_swap(color)) throw GtpError("swap-pieces is only the second move of a game");
    swap_pieces();
    return;
  }
  const auto move = position_.parse_move(text);
  if (!move) throw GtpError("invalid move '" + std::string(text) + "'");
  if (position_.stone(*move) != Hex::empty) throw GtpError("cell " + position_.move_name(*move) + " is occupied");
  history_.push_back({position_, resigned_});
  position_.place(*move, color);
}

std::span<const GtpSession::Command> GtpSession::commands() {
  static const Command table[] = {
      {"protocol_version", [](GtpSession&, Args) -> std::string { return "2"; }},
      {"name", [](GtpSession& s, Args) { return s.name_; }},
      {"version", [](GtpSession& s, Args) { return s.version_; }},
      {"known_command",
       [](GtpSession&, Args args) -> std::string {
         expect_args(args, 1);
         for (const Command& command : commands())
           if (command.name == args[0]) return "true";
         return "false";
       }},
      {"list_commands",
       [](GtpSession&, Args) {
         std::string names;
         for (const Command& command : commands()) (names += command.name) += '\n';
         names.pop_back();
         return names;
       }},
      {"quit",
       [](GtpSession& s, Args) {
         s.quit_ = true;
         return std::string();
       }},
      {"boardsize",
       [](GtpSession& s, Args args) {
         if (args.size() != 1 && args.size() != 2) throw GtpError("wrong number of arguments");
         const int size = parse_size(args[0]);
         if (args.size() == 2 && parse_size(args[1]) != size) throw GtpError("unacceptable size");
         s.new_game(size);
         return std::string();
       }},
      {"clear_board",
       [](GtpSession& s, Args args) {
         expect_args(args, 0);
         s.new_game(s.position_.size());
         return std::string();
       }},
      {"play",
       [](GtpSession& s, Args args) {
         expect_args(args, 2);
         s.play(parse_color(args[0]), args[1]);
         return std::string();
       }},
      {"genmove",
       [](GtpSession& s, Args args) -> std::string {
         expect_args(args, 1);
         const Player color = parse_color(args[0]);
         if (s.winner()) return "resign";
         Hex asked = s.position_;
         asked.set_to_move(color);
         const int empty = asked.size() * asked.size() - asked.moves_played();
         const MoveRequest request{s.clock_.budget(color, empty), s.can_swap(color),
                                   s.swap_ && s.history_.empty() && asked.moves_played() == 0};
         const auto t0 = std::chrono::steady_clock::now();
         const MoveChoice choice = s.genmove_(asked, request);
         s.clock_.used(color, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
         switch (choice.kind) {
           case MoveChoice::resign:
             s.history_.push_back({s.position_, s.resigned_});
             s.resigned_ = color;
             return "resign";
           case MoveChoice::swap:
             if (!request.may_swap) throw GtpError("the engine chose swap-pieces where it is not allowed");
             s.swap_pieces();
             return std::string(swap_move);
           case MoveChoice::cell:
             break;
         }
         const int cells = asked.size() * asked.size();
         if (choice.move >= cells || asked.stone(choice.move) != Hex::empty)
           throw GtpError("the engine chose an illegal move");
         s.history_.push_back({s.position_, s.resigned_});
         s.position_ = asked;
         s.position_.play(choice.move);
         return s.position_.move_name(choice.move);
       }},
      {"undo",
       [](GtpSession& s, Args args) {
         expect_args(args, 0);
         if (s.history_.empty()) throw GtpError("cannot undo");
         s.position_ = s.history_.back().position;
         s.resigned_ = s.history_.back().resigned;
         s.history_.pop_back();
         return std::string();
       }},
      {"showboard",
       [](GtpSession& s, Args args) {
         expect_args(args, 0);
         std::string board = s.position_.board_text();
         board.pop_back();  // the response ends the last line
         return '\n' + board;
       }},
      {"final_score",
       [](GtpSession& s, Args args) -> std::string {
         expect_args(args, 0);
         const auto winner = s.winner();
         if (!winner) throw GtpError("the game is not over");
         return *winner == Hex::black ? "B+" : "W+";
       }},
      {"time_settings",
       [](GtpSession& s, Args args) {
         expect_args(args, 3);
         s.clock_.settings(parse_seconds(args[0]), parse_seconds(args[1]), parse_stones(args[2]));
         return std::string();
       }},
      {"time_left",
       [](GtpSession& s, Args args) -> std::string {
         // GTP sends colour, seconds and stones; Hex programs also send the
         // colour and seconds only (main time), or the colour alone to ask.
         if (args.empty() || args.size() > 3) throw GtpError("wrong number of arguments");
         const Player color = parse_color(args[0]);
         if (args.size() == 1) return s.clock_.remaining(color);
         s.clock_.time_left(color, parse_seconds(args[1]), args.size() == 3 ? parse_stones(args[2]) : 0);
         return std::string();
       }},
      {"param_game",
       [](GtpSession& s, Args args) -> std::string {
         // MoHex's form, which referees for Hex programs send to both players.
         if (args.empty()) return std::string("\n[bool] allow_swap ") + (s.swap_ ? "1" : "0");
         if (args.size() != 2) throw GtpError("expected no arguments, or a name and a value");
         if (args[0] != "allow_swap") throw GtpError("unknown parameter '" + std::string(args[0]) + "'");
         s.swap_ = parse_bool(args[1]);
         return std::string();
       }},
      {"rdmx-analyze",
       [](GtpSession& s, Args args) -> std::string {
         // HexGui's pspairs: each root move with its win rate for the colour asked.
         if (args.size() > 1) throw GtpError("wrong number of arguments");
         if (!s.analyze_) throw GtpError("this engine offers no analysis");
         if (s.winner()) throw GtpError("the game is over");
         Hex asked = s.position_;
         if (args.size() == 1) asked.set_to_move(parse_color(args[0]));
         std::string pairs;
         for (const MoveStats& m : s.analyze_(asked, 0)) {
           if (!pairs.empty()) pairs += ' ';
           pairs += asked.move_name(m.move) + ' ' + percent(m.win_rate);
         }
         return pairs;
       }},
      // HexGui asks for these on connecting and offers them in its menu.
      {"hexgui-analyze_commands",
       [](GtpSession&, Args) {
         return std::string(
             "pspairs/Win rates (rdmx)/rdmx-analyze %c\n"
             "string/Final score/final_score\n"
             "param/Game parameters/param_game");
       }},
  };
  return table;
}

std::string GtpSession::execute(std::string_view line) {
  // GTP preprocessing: drop control characters and comments, tabs are spaces.
  std::string clean;
  for (char ch : line) {
    if (ch == '#') break;
    if (ch == '\t') ch = ' ';
    if (static_cast<unsigned char>(ch) >= 32 && ch != 127) clean += ch;
  }
  std::vector<std::string_view> tokens;
  for (std::size_t pos = 0; (pos = clean.find_first_not_of(' ', pos)) != std::string::npos;) {
    const std::size_t end = std::min(clean.find(' ', pos), clean.size());
    tokens.push_back(std::string_view(clean).substr(pos, end - pos));
    pos = end;
  }
  if (tokens.empty()) return "";
  std::string id;
  if (tokens[0].find_first_not_of("0123456789") == std::string_view::npos) {
    id = tokens[0];
    tokens.erase(tokens.begin());
  }
  try {
    if (tokens.empty()) throw GtpError("missing command");
    for (const Command& command : commands())
      if (command.name == tokens[0]) return '=' + id + ' ' + command.respond(*this, Args(tokens).subspan(1)) + "\n\n";
    throw GtpError("unknown command");
  } catch (const GtpError& error) {
    return '?' + id + ' ' + error.what() + "\n\n";
  } catch (const std::exception& error) {
    // The engine failed (a search that could not run, say): the session
    // goes on, and the controller learns why.
    return '?' + id + " engine error: " + error.what() + "\n\n";
  }
}

void GtpSession::run(std::istream& in, std::ostream& out) {
  std::string line;
  while (!quit_ && std::getline(in, line)) {
    const std::string response = execute(line);
    if (!response.empty()) out << response << std::flush;
  }
}

}  // namespace rdmx::mcts
