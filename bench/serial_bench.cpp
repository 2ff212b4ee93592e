// rdmx-bench-serial: rdmx::serial against cereal, Boost.Serialization and
// msgpack-c on a record like the one of the "C++ serialization comparison"
// study HPX reports (section 3.2, Fig. 3), plus a large std::vector<double>
// with zero copy on. One process; under a launcher (scripts/bench serial
// runs it with -np 2) ranks other than 0 exit at once.
//
// The record: three integer ids, three strings (12, 24 and 96 characters),
// a std::vector<int64_t> of N elements (N = 100 and 1000, the study's count;
// values uniform in [0, 2^32)) and three doubles.
//
// Variants (all in one run, interleaved):
//   rdmx-zc-off  rdmx, zero copy off: everything copied into the archive
//   rdmx-zc-on   rdmx, HPX's threshold (4096 bytes): the vector becomes a
//                pointer chunk when it reaches the threshold (N = 1000)
//   cereal       BinaryOutputArchive over std::ostringstream (read back through a
//                stream over the same bytes, no copy)
//   boost        binary_oarchive over std::ostringstream, default flags
//   msgpack      msgpack::pack into an sbuffer, unpack + convert
// A round trip serializes into a fresh archive or stream and deserializes
// into a fresh Record, as a call's arguments would be. For rdmx-zc-on the
// receiver's chunk is the sender's memory (what an RDMA get would deliver);
// the get itself is network time and not measured here.
//
// Metrics per variant and size: ns_roundtrip, ns_serialize, ns_deserialize
// (medians over repetitions), archive_bytes (the bytes a sender sends
// eagerly: for rdmx the flattened message, header and chunk table included),
// total_bytes (archive_bytes plus the bytes left in chunks for RDMA). Ratios
// rdmx/peer (time_ratio: per-repetition ratios of round trips, median;
// size_ratio: of archive_bytes) below 1 mean rdmx is faster or smaller.
//
// Flags: --reps=N  --time=SECONDS (per measurement)  --quick
#include <boost/archive/binary_iarchive.hpp>
#include <boost/archive/binary_oarchive.hpp>
#include <boost/serialization/string.hpp>
#include <boost/serialization/vector.hpp>
#include <boost/version.hpp>
#include <cereal/archives/binary.hpp>
#include <cereal/types/string.hpp>
#include <cereal/types/vector.hpp>
#include <cereal/version.hpp>
#include <msgpack.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <utility>
#include <istream>
#include <memory>
#include <random>
#include <span>
#include <sstream>
#include <stdexcept>
#include <streambuf>
#include <string>
#include <string_view>
#include <vector>

#include "json.hpp"
#include "rdmx/core/env.hpp"
#include "rdmx/core/error.hpp"
#include "rdmx/serial/serial.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using rdmx::bench::JsonLine;
namespace serial = rdmx::serial;

struct Record {
  std::int64_t id = 0;
  std::int64_t parent = 0;
  std::int32_t kind = 0;
  std::string name, owner, description;
  std::vector<std::int64_t> values;
  double score = 0, weight = 0, timestamp = 0;

  // rdmx and cereal both call this.
  template <class Archive>
  void serialize(Archive& ar) {
    ar(id, parent, kind, name, owner, description, values, score, weight, timestamp);
  }
  MSGPACK_DEFINE(id, parent, kind, name, owner, description, values, score, weight, timestamp);
  friend bool operator==(const Record&, const Record&) = default;
};

}  // namespace

// Boost's non-intrusive form (a member would clash with cereal's versioned one).
namespace boost::serialization {
template <class Archive>
void serialize(Archive& ar, Record& r, unsigned) {
  ar & r.id & r.parent & r.kind & r.name & r.owner & r.description & r.values & r.score & r.weight & r.timestamp;
}
}  // namespace boost::serialization

namespace {

Record make_record(std::size_t elements) {
  Record r;
  r.id = 0x3a5f12c9b4e1d702;
  r.parent = 0x1c0ffee5a11ce;
  r.kind = 7;
  r.name = "proton-00042";
  r.owner = "collaboration/run-2024-a";
  r.description = std::string(
      "measured on the north detector after recalibration; cuts: pt > 2 GeV, |eta| < 2.4, isolation 0.15");
  r.description.resize(96);
  std::mt19937_64 rng(42);
  r.values.resize(elements);
  for (auto& v : r.values) v = static_cast<std::int64_t>(rng() >> 32);
  r.score = 0.8125;
  r.weight = 1.0 / 3.0;
  r.timestamp = 1.7e9;
  return r;
}

// What a codec produced: the bytes sent eagerly and, for rdmx zero copy, the
// chunks a receiver pulls (here: the sender's memory).
struct Encoded {
  std::span<const std::byte> bytes;
  std::span<const serial::ReceivedChunk> chunks;
  std::size_t chunk_bytes = 0;
};

std::span<const std::byte> as_bytes(std::string_view s) { return {reinterpret_cast<const std::byte*>(s.data()), s.size()}; }

// An input stream over bytes that exist already (cereal and Boost read streams).
class ByteStreamBuf : public std::streambuf {
 public:
  explicit ByteStreamBuf(std::span<const std::byte> bytes) {
    char* p = const_cast<char*>(reinterpret_cast<const char*>(bytes.data()));
    setg(p, p, p + bytes.size());
  }
};

struct RdmxCodec {
  std::size_t threshold;
  std::vector<serial::ReceivedChunk> chunks;  // reused, like a receiver's per-message bookkeeping
  std::size_t initial_capacity = serial::ArchiveOptions{}.initial_capacity;

  template <class F>
  void with_encoded(const Record& r, F&& consume) {
    serial::ArchiveOptions options;
    options.zero_copy_threshold = threshold;
    options.initial_capacity = initial_capacity;
    serial::OutputArchive ar(options);
    ar(r);
    const std::span<const std::byte> message = ar.flatten();
    chunks.clear();
    for (const serial::OutOfLineChunk& c : ar.out_of_line_chunks()) chunks.push_back({{c.data, c.size}, nullptr, {}});
    consume(Encoded{message, chunks, ar.out_of_line_bytes()});
  }
  static void deserialize(const Encoded& e, Record& out) {
    serial::InputArchive in(e.bytes, e.chunks);
    in(out);
    in.finish();
  }
};

struct CerealCodec {
  template <class F>
  void with_encoded(const Record& r, F&& consume) {
    std::ostringstream os(std::ios::binary);
    {
      cereal::BinaryOutputArchive ar(os);
      ar(r);
    }
    consume(Encoded{as_bytes(os.view()), {}, 0});
  }
  static void deserialize(const Encoded& e, Record& out) {
    ByteStreamBuf buf(e.bytes);
    std::istream is(&buf);
    cereal::BinaryInputArchive ar(is);
    ar(out);
  }
};

struct BoostCodec {
  template <class F>
  void with_encoded(const Record& r, F&& consume) {
    std::ostringstream os(std::ios::binary);
    {
      boost::archive::binary_oarchive ar(os);
      ar << r;
    }
    consume(Encoded{as_bytes(os.view()), {}, 0});
  }
  static void deserialize(const Encoded& e, Record& out) {
    ByteStreamBuf buf(e.bytes);
    std::istream is(&buf);
    boost::archive::binary_iarchive ar(is);
    ar >> out;
  }
};

struct MsgpackCodec {
  template <class F>
  void with_encoded(const Record& r, F&& consume) {
    msgpack::sbuffer buffer;
    msgpack::pack(buffer, r);
    consume(Encoded{as_bytes({buffer.data(), buffer.size()}), {}, 0});
  }
  static void deserialize(const Encoded& e, Record& out) {
    const msgpack::object_handle handle =
        msgpack::unpack(reinterpret_cast<const char*>(e.bytes.data()), e.bytes.size());
    handle.get().convert(out);
  }
};

// "Zero copy on" is HPX's threshold, 4096 bytes, at which the record's
// vector of 1000 values becomes a chunk (rdmx's default is 64 KiB, chosen
// from scripts/bench bandwidth: docs/results/serialization.md).
constexpr std::size_t hpx_threshold = 4096;

// ---- measurement ----

std::uint64_t sink = 0;  // keeps results observable so nothing is optimised away

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// ns per call of `f` over `n` calls.
template <class F>
double time_ns(F&& f, std::size_t n) {
  const auto start = Clock::now();
  for (std::size_t i = 0; i < n; ++i) f();
  return std::chrono::duration<double, std::nano>(Clock::now() - start).count() / static_cast<double>(n);
}

// Enough calls of `f` for one measurement to take about `seconds`.
template <class F>
std::size_t calibrate(F&& f, double seconds) {
  std::size_t n = 1;
  for (;;) {
    const double ns = time_ns(f, n);
    if (ns * static_cast<double>(n) > 2e8 * seconds || n >= (std::size_t{1} << 24)) {
      return std::max<std::size_t>(1, static_cast<std::size_t>(seconds * 1e9 / ns));
    }
    n *= 4;
  }
}

struct Options {
  unsigned reps = 7;
  double seconds = 0.05;
  bool quick = false;
};

// One library's three timed operations on one input, ready to run.
struct Variant {
  std::string name;
  std::function<void()> round_trip, serialize, deserialize;
  std::size_t archive_bytes = 0, total_bytes = 0;
  std::size_t threshold = 0;  // rdmx only
  bool rdmx = false;
  std::size_t iterations = 0;
  std::vector<double> rt, ser, de;
};

template <class Codec>
Variant make_variant(std::string name, Codec codec, const Record& record, bool rdmx, std::size_t threshold) {
  auto shared = std::make_shared<Codec>(std::move(codec));
  Variant v;
  v.name = std::move(name);
  v.rdmx = rdmx;
  v.threshold = threshold;
  // The bytes a receiver would hold, kept for deserialize-only timing.
  auto kept = std::make_shared<std::vector<std::byte>>();
  auto kept_chunks = std::make_shared<std::vector<serial::ReceivedChunk>>();
  bool correct = false;
  shared->with_encoded(record, [&](const Encoded& e) {
    v.archive_bytes = e.bytes.size();
    v.total_bytes = e.bytes.size() + e.chunk_bytes;
    kept->assign(e.bytes.begin(), e.bytes.end());
    kept_chunks->assign(e.chunks.begin(), e.chunks.end());
    Record out;
    Codec::deserialize(e, out);
    correct = out == record;
  });
  if (!correct) throw rdmx::Error(rdmx::Errc::protocol, v.name + " did not reproduce the record");
  v.round_trip = [shared, &record] {
    shared->with_encoded(record, [](const Encoded& e) {
      Record out;
      Codec::deserialize(e, out);
      sink += out.values.size();
    });
  };
  v.serialize = [shared, &record] { shared->with_encoded(record, [](const Encoded& e) { sink += e.bytes.size(); }); };
  v.deserialize = [kept, kept_chunks] {
    Record out;
    Codec::deserialize(Encoded{*kept, *kept_chunks, 0}, out);
    sink += out.values.size();
  };
  return v;
}

std::string peers_text() {
  return "cereal " + std::to_string(CEREAL_VERSION_MAJOR) + "." + std::to_string(CEREAL_VERSION_MINOR) + "." +
         std::to_string(CEREAL_VERSION_PATCH) + ", boost " + BOOST_LIB_VERSION + ", msgpack-c " + MSGPACK_VERSION;
}

void emit(const Options& o, const std::string& variant, std::size_t size, const char* metric, double value,
          const std::string& input, std::size_t elements, std::size_t threshold, std::size_t iterations) {
  JsonLine line;
  line.field("bench", "serial")
      .field("variant", variant)
      .field("size", size)
      .field("metric", metric)
      .field("value", value)
      .field("input", input)
      .field("elements", elements)
      .field("zero_copy_threshold", threshold)
      .field("repetitions", o.reps)
      .field("iterations", iterations)
      .field("placement", "1 thread, serialize and deserialize in one process")
      .field("peers", peers_text());
  line.print();
}

// ---- the record comparison ----

void record_comparison(const Options& o, std::size_t elements) {
  const Record record = make_record(elements);
  std::vector<Variant> variants;
  variants.push_back(make_variant("rdmx-zc-off", RdmxCodec{0, {}}, record, true, 0));
  variants.push_back(make_variant("rdmx-zc-on", RdmxCodec{hpx_threshold, {}}, record, true,
                                  hpx_threshold));
  variants.push_back(make_variant("cereal", CerealCodec{}, record, false, 0));
  variants.push_back(make_variant("boost", BoostCodec{}, record, false, 0));
  variants.push_back(make_variant("msgpack", MsgpackCodec{}, record, false, 0));

  for (Variant& v : variants) v.iterations = calibrate(v.round_trip, o.seconds);
  for (unsigned rep = 0; rep < o.reps; ++rep) {
    // Rotate the order so slow drifts of the machine hit every variant alike.
    for (std::size_t k = 0; k < variants.size(); ++k) {
      Variant& v = variants[(k + rep) % variants.size()];
      v.rt.push_back(time_ns(v.round_trip, v.iterations));
      v.ser.push_back(time_ns(v.serialize, v.iterations));
      v.de.push_back(time_ns(v.deserialize, v.iterations));
    }
  }

  const std::string input = "record: 3 ids, 3 strings (12/24/96 chars), int64 x " + std::to_string(elements) + ", 3 doubles";
  const std::size_t size = elements * sizeof(std::int64_t);
  std::fprintf(stderr, "\nrecord with %zu int64 values (%zu bytes of them), median of %u:\n", elements, size, o.reps);
  std::fprintf(stderr, "%-12s %12s %12s %12s %14s %12s\n", "variant", "roundtrip ns", "serialize ns", "deserial. ns",
               "archive bytes", "total bytes");
  for (const Variant& v : variants) {
    const double rt = median(v.rt), ser = median(v.ser), de = median(v.de);
    emit(o, v.name, size, "ns_roundtrip", rt, input, elements, v.threshold, v.iterations);
    emit(o, v.name, size, "ns_serialize", ser, input, elements, v.threshold, v.iterations);
    emit(o, v.name, size, "ns_deserialize", de, input, elements, v.threshold, v.iterations);
    emit(o, v.name, size, "archive_bytes", static_cast<double>(v.archive_bytes), input, elements, v.threshold, v.iterations);
    emit(o, v.name, size, "total_bytes", static_cast<double>(v.total_bytes), input, elements, v.threshold, v.iterations);
    std::fprintf(stderr, "%-12s %12.0f %12.0f %12.0f %14zu %12zu\n", v.name.c_str(), rt, ser, de, v.archive_bytes,
                 v.total_bytes);
  }
  std::fprintf(stderr, "%-22s %12s %12s\n", "ratio", "time", "size");
  for (const Variant& mine : variants) {
    if (!mine.rdmx) continue;
    for (const Variant& peer : variants) {
      if (peer.rdmx) continue;
      std::vector<double> ratio;
      for (unsigned rep = 0; rep < o.reps; ++rep) ratio.push_back(mine.rt[rep] / peer.rt[rep]);
      const double time_ratio = median(ratio);
      const double size_ratio = static_cast<double>(mine.archive_bytes) / static_cast<double>(peer.archive_bytes);
      const std::string name = mine.name + "/" + peer.name;
      emit(o, name, size, "time_ratio", time_ratio, input, elements, mine.threshold, mine.iterations);
      emit(o, name, size, "size_ratio", size_ratio, input, elements, mine.threshold, mine.iterations);
      std::fprintf(stderr, "%-22s %12.3f %12.3f\n", name.c_str(), time_ratio, size_ratio);
    }
  }
}

// ---- the archive's initial capacity ----

// A fresh archive's inline buffer starts at ArchiveOptions::initial_capacity
// bytes and doubles as it fills: too small costs reallocations and copies,
// too large an allocation that malloc serves from fresh pages. Round trips
// of the record into fresh archives, as a call's arguments are encoded: N =
// 100 with zero copy on (984 inline bytes) and N = 1000 with it off (8185).
void capacity_sweep(const Options& o) {
  std::fprintf(stderr, "\narchive initial capacity: record round trip ns, median of %u:\n", o.reps);
  std::fprintf(stderr, "%10s %14s %14s\n", "capacity", "N=100 zc on", "N=1000 zc off");
  const std::vector<std::size_t> capacities{64, 256, 1024, 4096, 16384, 65536};
  std::vector<std::vector<double>> medians(capacities.size());
  for (const auto& [elements, threshold] : {std::pair<std::size_t, std::size_t>{100, hpx_threshold},
                                            std::pair<std::size_t, std::size_t>{1000, 0}}) {
    const Record record = make_record(elements);
    std::vector<Variant> variants;
    for (std::size_t capacity : capacities)
      variants.push_back(make_variant("rdmx-capacity-" + std::to_string(capacity), RdmxCodec{threshold, {}, capacity},
                                      record, true, threshold));
    for (Variant& v : variants) v.iterations = calibrate(v.round_trip, o.seconds);
    for (unsigned rep = 0; rep < o.reps; ++rep)
      for (std::size_t k = 0; k < variants.size(); ++k) {
        Variant& v = variants[(k + rep) % variants.size()];
        v.rt.push_back(time_ns(v.round_trip, v.iterations));
      }
    const std::string input = "record with int64 x " + std::to_string(elements) + ", archive initial capacity";
    for (std::size_t i = 0; i < variants.size(); ++i) {
      medians[i].push_back(median(variants[i].rt));
      emit(o, variants[i].name, elements * sizeof(std::int64_t), "ns_roundtrip", medians[i].back(), input, elements,
           threshold, variants[i].iterations);
    }
  }
  for (std::size_t i = 0; i < capacities.size(); ++i)
    std::fprintf(stderr, "%10zu %14.0f %14.0f\n", capacities[i], medians[i][0], medians[i][1]);
}

// ---- one large std::vector<double> ----

void vector_scaling(const Options& o, const std::vector<std::size_t>& sizes) {
  std::fprintf(stderr, "\nstd::vector<double> argument, median of %u:\n", o.reps);
  std::fprintf(stderr, "%10s %-12s %14s %14s %14s\n", "bytes", "variant", "serialize ns", "deserial. ns", "archive bytes");
  for (std::size_t bytes : sizes) {
    const std::vector<double> data(bytes / sizeof(double), 0.5);
    for (std::size_t threshold : {hpx_threshold, std::size_t{0}}) {
      serial::ArchiveOptions options;
      options.zero_copy_threshold = threshold;
      std::size_t archive_bytes = 0;
      std::vector<std::byte> kept;
      std::vector<serial::ReceivedChunk> chunks;
      {
        serial::OutputArchive ar(options);
        ar(data);
        const auto message = ar.flatten();
        archive_bytes = message.size();
        kept.assign(message.begin(), message.end());
        for (const auto& c : ar.out_of_line_chunks()) chunks.push_back({{c.data, c.size}, nullptr, {}});
      }
      auto serialize = [&] {
        serial::OutputArchive ar(options);
        ar(data);
        sink += ar.flatten().size();
      };
      auto deserialize = [&] {
        serial::InputArchive in(kept, chunks);
        std::vector<double> out;
        in(out);
        sink += out.size();
      };
      const std::size_t n_ser = calibrate(serialize, o.seconds / 4), n_de = calibrate(deserialize, o.seconds / 4);
      std::vector<double> ser, de;
      for (unsigned rep = 0; rep < o.reps; ++rep) {
        ser.push_back(time_ns(serialize, n_ser));
        de.push_back(time_ns(deserialize, n_de));
      }
      const std::string variant = threshold == 0 ? "rdmx-zc-off" : "rdmx-zc-on";
      const std::string input = "std::vector<double>";
      emit(o, variant, bytes, "ns_serialize", median(ser), input, data.size(), threshold, n_ser);
      emit(o, variant, bytes, "ns_deserialize", median(de), input, data.size(), threshold, n_de);
      emit(o, variant, bytes, "archive_bytes", static_cast<double>(archive_bytes), input, data.size(), threshold, n_ser);
      std::fprintf(stderr, "%10zu %-12s %14.0f %14.0f %14zu\n", bytes, variant.c_str(), median(ser), median(de),
                   archive_bytes);
    }
  }
}

// Ranks other than 0 of a launched job have nothing to do.
bool is_secondary_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"}) {
    if (const auto value = rdmx::env::get(name)) return *value != "0";
  }
  return false;
}

[[noreturn]] void usage_error(const std::string& what) {
  throw rdmx::Error(rdmx::Errc::invalid_argument, what + "\nusage: rdmx-bench-serial [--reps=N] [--time=SECONDS] [--quick]");
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    try {
      if (arg == "--quick") {
        o.quick = true;
        o.reps = 3;
        o.seconds = 0.005;
      } else if (arg.rfind("--reps=", 0) == 0) {
        o.reps = static_cast<unsigned>(rdmx::env::parse_count(arg.substr(7), "--reps"));
      } else if (arg.rfind("--time=", 0) == 0) {
        o.seconds = std::stod(arg.substr(7));
        if (!(o.seconds > 0)) usage_error("--time wants a positive number of seconds");
      } else {
        usage_error("unknown argument '" + arg + "'");
      }
    } catch (const std::logic_error&) {
      usage_error("bad value in '" + arg + "'");
    }
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  if (is_secondary_rank()) return 0;
  try {
    const Options o = parse(argc, argv);
    std::fprintf(stderr, "rdmx-bench-serial: %s; %u repetitions (median), ~%.3f s per measurement\n",
                 peers_text().c_str(), o.reps, o.seconds);
    for (std::size_t elements : {std::size_t{100}, std::size_t{1000}}) record_comparison(o, elements);
    capacity_sweep(o);
    constexpr std::size_t KiB = 1024, MiB = KiB * KiB;
    std::vector<std::size_t> sizes{KiB, 64 * KiB, MiB, 16 * MiB};
    if (!o.quick) sizes = {KiB, 4 * KiB, 16 * KiB, 64 * KiB, 256 * KiB, MiB, 4 * MiB, 16 * MiB};
    vector_scaling(o, sizes);
    std::fprintf(stderr, "(checksum %llu)\n", static_cast<unsigned long long>(sink % 1000));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rdmx-bench-serial: %s\n", e.what());
    return 1;
  }
  return 0;
}
