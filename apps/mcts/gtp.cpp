#include "mcts/gtp.hpp"

#include <algorithm>
#include <charconv>
#include <istream>
#include <ostream>
#include <stdexcept>
#include <utility>

namespace rdmx::mcts {

namespace {

// A failure response; only these are answered with "? message", anything
// else thrown (by a GenMove, say) is the caller's to handle.
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

}  // namespace

GtpSession::GtpSession(GenMove genmove, std::string name, std::string version, int board_size)
    : genmove_(std::move(genmove)), name_(std::move(name)), version_(std::move(version)), position_(board_size) {}

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
         s.position_ = Hex(size);
         s.history_.clear();
         return std::string();
       }},
      {"clear_board",
       [](GtpSession& s, Args args) {
         expect_args(args, 0);
         s.position_ = Hex(s.position_.size());
         s.history_.clear();
         return std::string();
       }},
      {"play",
       [](GtpSession& s, Args args) {
         expect_args(args, 2);
         const Player color = parse_color(args[0]);
         const auto move = s.position_.parse_move(args[1]);
         if (!move) throw GtpError("invalid move '" + std::string(args[1]) + "'");
         if (s.position_.terminal()) throw GtpError("game is over");
         if (s.position_.stone(*move) != Hex::empty) throw GtpError("cell " + s.position_.move_name(*move) + " is occupied");
         s.history_.push_back(s.position_);
         s.position_.place(*move, color);
         return std::string();
       }},
      {"genmove",
       [](GtpSession& s, Args args) -> std::string {
         expect_args(args, 1);
         const Player color = parse_color(args[0]);
         if (s.position_.terminal()) return "resign";
         const Hex before = s.position_;
         s.position_.set_to_move(color);
         const auto move = s.genmove_(s.position_);
         if (!move) return "resign";
         const int cells = s.position_.size() * s.position_.size();
         if (*move >= cells || s.position_.stone(*move) != Hex::empty) {
           s.position_ = before;
           throw GtpError("the engine chose an illegal move");
         }
         s.history_.push_back(before);
         s.position_.place(*move, color);
         return s.position_.move_name(*move);
       }},
      {"undo",
       [](GtpSession& s, Args args) {
         expect_args(args, 0);
         if (s.history_.empty()) throw GtpError("cannot undo");
         s.position_ = s.history_.back();
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
      // HexGui asks for this on connecting; we offer no analysis commands.
      {"hexgui-analyze_commands", [](GtpSession&, Args) { return std::string(); }},
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
