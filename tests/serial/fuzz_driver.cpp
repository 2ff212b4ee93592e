// A plain driver for fuzz_archive.cpp, built with the project's compiler
// (and its sanitizers in the ASan stage), for machines without libFuzzer and
// as a quick test everywhere:
//   serial_fuzz_driver [--runs=N] [--seed=S]   mutate the built-in seeds N times
//   serial_fuzz_driver FILE...                 run these inputs (a corpus, a crash)
//   serial_fuzz_driver --write-seeds=DIR       write the seeds as a libFuzzer corpus
// Mutations: bit flips, bytes set to boundary values, truncation, repeated
// and inserted ranges, and splices of two seeds; deterministic per --seed.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "fuzz_input.hpp"
#include "rdmx/serial/serial.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

using namespace rdmx::serial;
using Input = std::vector<std::uint8_t>;

Input seed(const fuzzing::Fuzzed& value, std::size_t threshold, bool signed_archive) {
  ArchiveOptions options;
  options.zero_copy_threshold = threshold;
  OutputArchive ar(options);
  if (signed_archive) ar.set_signature(signature_of<fuzzing::Fuzzed>());
  ar(value);
  return fuzzing::make_input(ar);
}

std::vector<Input> seeds() {
  std::vector<Input> all;
  fuzzing::Fuzzed empty;
  all.push_back(seed(empty, 0, false));
  fuzzing::Fuzzed full;
  std::get<0>(full) = "name";
  std::get<1>(full) = {1, -2, std::numeric_limits<std::int64_t>::max()};
  std::get<2>(full) = {{1, "one"}, {-5, ""}};
  std::get<3>(full) = std::string("text");
  std::get<4>(full) = {true, false, true};
  std::get<5>(full) = {3, 1, 2};
  std::get<6>(full) = std::make_unique<std::vector<std::string>>(std::vector<std::string>{"a", "bc"});
  all.push_back(seed(full, 0, true));
  std::get<3>(full) = std::vector<double>(40, 0.5);  // 320 bytes: a chunk at threshold 64
  std::get<0>(full) = std::string(100, 'x');
  std::get<1>(full) = std::vector<std::int64_t>(20, 7);
  all.push_back(seed(full, 64, false));
  all.push_back(seed(full, 64, true));
  std::get<3>(full) = std::int32_t{-9};
  std::get<6>(full).reset();
  all.push_back(seed(full, 0, false));
  return all;
}

void mutate(Input& input, const std::vector<Input>& pool, std::mt19937_64& rng) {
  auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % (n == 0 ? 1 : n)); };
  const int steps = 1 + static_cast<int>(rng() % 4);
  for (int s = 0; s < steps; ++s) {
    switch (rng() % 7) {
      case 0:
        if (!input.empty()) input[pick(input.size())] ^= static_cast<std::uint8_t>(1u << (rng() % 8));
        break;
      case 1: {
        static constexpr std::uint8_t boundary[] = {0x00, 0x01, 0x7f, 0x80, 0xff, 0xfe, 0x40};
        if (!input.empty()) input[pick(input.size())] = boundary[pick(sizeof boundary)];
        break;
      }
      case 2:
        input.resize(pick(input.size() + 1));
        break;
      case 3: {  // repeat a range
        if (input.empty()) break;
        const std::size_t from = pick(input.size()), n = pick(input.size() - from) + 1;
        const Input range(input.begin() + static_cast<std::ptrdiff_t>(from), input.begin() + static_cast<std::ptrdiff_t>(from + n));
        input.insert(input.begin() + static_cast<std::ptrdiff_t>(pick(input.size() + 1)), range.begin(), range.end());
        break;
      }
      case 4: {  // insert random bytes
        const std::size_t at = pick(input.size() + 1), n = 1 + pick(8);
        for (std::size_t i = 0; i < n; ++i) input.insert(input.begin() + static_cast<std::ptrdiff_t>(at), static_cast<std::uint8_t>(rng()));
        break;
      }
      case 5: {  // splice: our head, another seed's tail
        const Input& other = pool[pick(pool.size())];
        input.resize(pick(input.size() + 1));
        const std::size_t from = pick(other.size() + 1);
        input.insert(input.end(), other.begin() + static_cast<std::ptrdiff_t>(from), other.end());
        break;
      }
      default:  // the message length prefix
        if (input.size() >= 2) input[pick(2)] = static_cast<std::uint8_t>(rng());
    }
  }
}

int run_files(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::ifstream in(argv[i], std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "serial_fuzz_driver: cannot read %s\n", argv[i]);
      return 2;
    }
    const Input input((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(input.data(), input.size());
  }
  std::printf("serial_fuzz_driver: %d inputs ran\n", argc - 1);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  unsigned long long runs = 20000, seed_value = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--runs=", 0) == 0) {
      runs = std::stoull(arg.substr(7));
    } else if (arg.rfind("--seed=", 0) == 0) {
      seed_value = std::stoull(arg.substr(7));
    } else if (arg.rfind("--write-seeds=", 0) == 0) {
      const std::string dir = arg.substr(14);
      const auto all = seeds();
      for (std::size_t s = 0; s < all.size(); ++s) {
        std::ofstream out(dir + "/seed-" + std::to_string(s), std::ios::binary);
        out.write(reinterpret_cast<const char*>(all[s].data()), static_cast<std::streamsize>(all[s].size()));
        if (!out) {
          std::fprintf(stderr, "serial_fuzz_driver: cannot write to %s\n", dir.c_str());
          return 2;
        }
      }
      return 0;
    } else if (arg.rfind("--", 0) == 0) {
      std::fprintf(stderr, "usage: serial_fuzz_driver [--runs=N] [--seed=S] | --write-seeds=DIR | FILE...\n");
      return 2;
    } else {
      return run_files(argc, argv);
    }
  }
  const std::vector<Input> pool = seeds();
  for (const Input& s : pool) LLVMFuzzerTestOneInput(s.data(), s.size());
  std::mt19937_64 rng(seed_value);
  for (unsigned long long r = 0; r < runs; ++r) {
    Input input = pool[rng() % pool.size()];
    mutate(input, pool, rng);
    LLVMFuzzerTestOneInput(input.data(), input.size());
  }
  std::printf("serial_fuzz_driver: %llu mutated inputs ran (seed %llu)\n", runs, seed_value);
  return 0;
}
