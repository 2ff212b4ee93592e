// Large data is not copied: pointer chunks point at the caller's memory, the
// inline bytes do not grow with it, the threshold is exact, and the
// flattened message describes every chunk so a receiver can get it.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "rdmx/serial/serial.hpp"
#include "support.hpp"

namespace rdmx::serial {
namespace {

using testing::chunk_threshold;
using testing::with_threshold;

TEST(ZeroCopy, LargeVectorBecomesAPointerChunkToItsElements) {
  std::vector<double> data(1 << 20, 1.5);  // 8 MiB
  OutputArchive ar;                         // default threshold, 65536
  ar(std::uint32_t{7}, data);
  ASSERT_EQ(ar.out_of_line_chunks().size(), 1u);
  const OutOfLineChunk& chunk = ar.out_of_line_chunks()[0];
  EXPECT_EQ(chunk.kind, ChunkKind::pointer);
  EXPECT_EQ(chunk.data, reinterpret_cast<const std::byte*>(data.data()));  // the user's memory itself
  EXPECT_EQ(chunk.size, data.size() * sizeof(double));
  EXPECT_EQ(chunk.position, ar.inline_bytes().size());
  EXPECT_EQ(ar.inline_bytes().size(), sizeof(std::uint32_t) + 3);  // the id and the count's varint
  EXPECT_EQ(ar.out_of_line_bytes(), data.size() * sizeof(double));
}

// The default threshold is where pulling started to beat sending eagerly
// (docs/results/serialization.md): 48 KiB travels inline, 64 KiB as a chunk.
TEST(ZeroCopy, DefaultThresholdIsTheMeasuredCrossover) {
  const std::vector<char> eager(48 * 1024, 'e'), pulled(64 * 1024, 'p');
  OutputArchive ar;
  ar(eager, pulled);
  ASSERT_EQ(ar.out_of_line_chunks().size(), 1u);
  EXPECT_EQ(ar.out_of_line_chunks()[0].data, reinterpret_cast<const std::byte*>(pulled.data()));
  EXPECT_GE(ar.inline_bytes().size(), eager.size());
}

TEST(ZeroCopy, InlineBytesDoNotGrowWithTheVector) {
  std::size_t previous = 0;
  for (std::size_t n : {std::size_t{1} << 10, std::size_t{1} << 14, std::size_t{1} << 18, std::size_t{1} << 21}) {
    std::vector<double> data(n);
    OutputArchive ar(with_threshold(chunk_threshold));
    ar(data);
    const std::size_t message = ar.flatten().size();
    EXPECT_LE(ar.inline_bytes().size(), 4u) << n;  // only the count
    EXPECT_LE(message, 48u) << n;                  // header, count, one chunk descriptor
    if (previous != 0) {
      EXPECT_LE(message, previous + 1) << n;  // at most a longer varint
    }
    previous = message;
  }
}

TEST(ZeroCopy, ThresholdIsExact) {
  constexpr std::size_t threshold = 4096;
  for (std::size_t n : {threshold - 1, threshold, threshold + 1}) {
    std::vector<std::uint8_t> bytes(n, 0xab);
    std::string text(n, 't');
    OutputArchive ar(with_threshold(threshold));
    ar(bytes, text);
    const std::size_t expected_chunks = n >= threshold ? 2 : 0;
    EXPECT_EQ(ar.out_of_line_chunks().size(), expected_chunks) << n;
    EXPECT_EQ(ar.inline_bytes().size(), 2 * 2 + (n >= threshold ? 0 : 2 * n)) << n;
    const auto message = ar.flatten();
    const auto chunks = testing::chunks_of(ar);
    InputArchive in(message, chunks);
    std::vector<std::uint8_t> bytes_out;
    std::string text_out;
    in(bytes_out, text_out);
    in.finish();
    EXPECT_EQ(bytes_out, bytes);
    EXPECT_EQ(text_out, text);
  }
}

TEST(ZeroCopy, ThresholdZeroCopiesEverything) {
  std::vector<double> data(1 << 16, 2.0);
  OutputArchive ar(with_threshold(0));
  ar(data);
  EXPECT_EQ(ar.zero_copy_threshold(), 0u);
  EXPECT_TRUE(ar.out_of_line_chunks().empty());
  EXPECT_EQ(ar.inline_bytes().size(), 3 + data.size() * sizeof(double));
  EXPECT_EQ(decode<std::vector<double>>(ar.flatten()), data);
}

TEST(ZeroCopy, ReceiverCopiesOnceFromTheChunkIntoTheVector) {
  std::vector<std::int64_t> data(10000);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::int64_t>(i * i);
  OutputArchive ar(with_threshold(chunk_threshold));
  ar(data);
  const auto message = ar.flatten();
  // The receiver's landing buffer: a copy of the chunk, as an RDMA get would leave it.
  std::vector<std::byte> landing(ar.out_of_line_chunks()[0].size);
  std::memcpy(landing.data(), data.data(), landing.size());
  const ReceivedChunk received{{landing.data(), landing.size()}, nullptr, {}};
  const auto out = decode<std::vector<std::int64_t>>(message, {&received, 1});
  EXPECT_EQ(out, data);
  EXPECT_NE(static_cast<const void*>(out.data()), static_cast<const void*>(landing.data()));
}

TEST(ZeroCopy, MessageDescribesEveryChunk) {
  std::vector<float> a(2000, 1.0f);
  std::string b(5000, 'b');
  OutputArchive ar(with_threshold(chunk_threshold));
  ar.set_signature(0x1234);
  ar(a, 17, b);
  const auto message = ar.flatten();
  const MessageView view(message);
  EXPECT_EQ(view.signature(), 0x1234u);
  ASSERT_EQ(view.chunk_count(), 2u);
  EXPECT_EQ(view.inline_bytes().size(), ar.inline_bytes().size());
  const ChunkDescriptor first = view.chunk(0), second = view.chunk(1);
  EXPECT_EQ(first.kind, ChunkKind::pointer);
  EXPECT_EQ(first.address, reinterpret_cast<std::uintptr_t>(a.data()));
  EXPECT_EQ(first.size, a.size() * sizeof(float));
  EXPECT_EQ(first.position, 2u);  // after the count
  EXPECT_TRUE(first.packed_rkey.empty());  // not registered (register_pointer_chunks does that)
  EXPECT_EQ(second.address, reinterpret_cast<std::uintptr_t>(b.data()));
  EXPECT_EQ(second.size, b.size());
  EXPECT_EQ(second.position, 2u + sizeof(int) + 2u);
  // magic, version|flags, inline size, chunk count, rkey bytes, signature; inline bytes; two descriptors
  EXPECT_EQ(message.size(), 1 + 1 + 1 + 1 + 1 + 8 + ar.inline_bytes().size() + 2 * wire::descriptor_size);
}

TEST(ZeroCopy, ChunkListInHpxForm) {
  std::vector<double> big(1000, 1.0);
  OutputArchive ar(with_threshold(chunk_threshold));
  ar(std::int32_t{1}, big, std::int32_t{2});
  const auto list = ar.chunks();
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list[0].kind, ChunkKind::index);
  EXPECT_EQ(list[0].bytes.size(), sizeof(std::int32_t) + 2);  // the int and the count
  EXPECT_EQ(list[1].kind, ChunkKind::pointer);
  EXPECT_EQ(list[1].bytes.data(), reinterpret_cast<const std::byte*>(big.data()));
  EXPECT_EQ(list[2].kind, ChunkKind::index);
  EXPECT_EQ(list[2].bytes.size(), sizeof(std::int32_t));
  EXPECT_EQ(std::string(to_string(list[1].kind)), "pointer");
}

TEST(ZeroCopy, ReceiverDecodesWithADifferentThreshold) {
  // Chunks are found by position, so the receiver needs no threshold at all.
  std::vector<std::uint16_t> data(3000, 9);
  OutputArchive ar(with_threshold(64));
  ar(data, std::string(100, 's'));
  EXPECT_EQ(ar.out_of_line_chunks().size(), 2u);
  const auto message = ar.flatten();
  const auto chunks = testing::chunks_of(ar);
  auto [v, s] = decode<std::vector<std::uint16_t>, std::string>(message, chunks);
  EXPECT_EQ(v, data);
  EXPECT_EQ(s, std::string(100, 's'));
}

TEST(ZeroCopy, TemporariesAreKeptByTheArchive) {
  // Chunks of a temporary would dangle once the statement ends: the archive keeps it.
  OutputArchive ar(with_threshold(chunk_threshold));
  ar(std::vector<double>(10000, 1.25), std::string(5000, 't'), 7);
  OutputArchive encoded = encode(std::vector<std::int32_t>(3000, -4));
  ASSERT_EQ(ar.out_of_line_chunks().size(), 2u);
  std::vector<double> noise(10000, 9.0);  // would likely reuse freed memory
  const auto message = ar.flatten();
  const auto chunks = testing::chunks_of(ar);
  auto [v, s, i] = decode<std::vector<double>, std::string, int>(message, chunks);
  EXPECT_EQ(v, std::vector<double>(10000, 1.25));
  EXPECT_EQ(s, std::string(5000, 't'));
  EXPECT_EQ(i, 7);
  const auto encoded_chunks = testing::chunks_of(encoded);
  EXPECT_EQ(decode<std::vector<std::int32_t>>(encoded.flatten(), encoded_chunks), std::vector<std::int32_t>(3000, -4));
}

TEST(Threshold, ParsesSizesAndOff) {
  EXPECT_EQ(parse_zero_copy_threshold("4096", "T"), 4096u);
  EXPECT_EQ(parse_zero_copy_threshold("16K", "T"), 16384u);
  EXPECT_EQ(parse_zero_copy_threshold("64", "T"), 64u);
  EXPECT_EQ(parse_zero_copy_threshold("0", "T"), 0u);
  EXPECT_EQ(parse_zero_copy_threshold("disabled", "T"), 0u);
  EXPECT_EQ(parse_zero_copy_threshold("off", "T"), 0u);
  std::string message;
  EXPECT_EQ(testing::error_of([] { parse_zero_copy_threshold("10", "RDMX_ZERO_COPY_THRESHOLD"); }, &message),
            Errc::invalid_argument);
  EXPECT_NE(message.find("RDMX_ZERO_COPY_THRESHOLD"), std::string::npos);
  EXPECT_EQ(testing::error_of([] { parse_zero_copy_threshold("lots", "T"); }), Errc::invalid_argument);
  EXPECT_EQ(testing::error_of([] { OutputArchive ar(with_threshold(63)); }), Errc::invalid_argument);
}

TEST(Threshold, ReadFromTheEnvironment) {
  ASSERT_EQ(setenv("RDMX_ZERO_COPY_THRESHOLD", "8K", 1), 0);
  EXPECT_EQ(zero_copy_threshold_from_env(), 8192u);
  ASSERT_EQ(setenv("RDMX_ZERO_COPY_THRESHOLD", "disabled", 1), 0);
  EXPECT_EQ(zero_copy_threshold_from_env(), 0u);
  ASSERT_EQ(setenv("RDMX_ZERO_COPY_THRESHOLD", "12Q", 1), 0);
  EXPECT_EQ(testing::error_of([] { zero_copy_threshold_from_env(); }), Errc::invalid_argument);
  ASSERT_EQ(unsetenv("RDMX_ZERO_COPY_THRESHOLD"), 0);
  EXPECT_EQ(zero_copy_threshold_from_env(), default_zero_copy_threshold);
}

}  // namespace
}  // namespace rdmx::serial
