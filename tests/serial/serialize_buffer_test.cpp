// SerializeBuffer: shared user memory that an archive references instead
// of copying, and that lives as long as the archive needs it.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "rdmx/serial/serial.hpp"
#include "support.hpp"

namespace rdmx::serial {
namespace {

using testing::chunk_threshold;
using testing::with_threshold;

TEST(SerializeBuffer, SmallBufferTravelsInline) {
  std::vector<int> data{1, 2, 3};
  auto buffer = SerializeBuffer<int>::reference(data.data(), data.size());
  OutputArchive ar(with_threshold(chunk_threshold));
  ar(buffer);
  EXPECT_TRUE(ar.out_of_line_chunks().empty());
  EXPECT_EQ(buffer.use_count(), 1);  // nothing to keep alive
  const auto out = decode<SerializeBuffer<int>>(ar.flatten());
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[2], 3);
  EXPECT_NE(out.data(), data.data());
}

TEST(SerializeBuffer, ReferenceBecomesAPointerChunkToTheUserMemory) {
  std::vector<double> data(10000, 0.25);
  auto buffer = SerializeBuffer<double>::reference(data.data(), data.size());
  {
    OutputArchive ar(with_threshold(chunk_threshold));
    ar(buffer);
    ASSERT_EQ(ar.out_of_line_chunks().size(), 1u);
    EXPECT_EQ(ar.out_of_line_chunks()[0].data, reinterpret_cast<const std::byte*>(data.data()));
    EXPECT_EQ(buffer.use_count(), 2);  // the archive holds a reference
    const auto message = ar.flatten();
    const auto chunks = testing::chunks_of(ar);
    const auto out = decode<SerializeBuffer<double>>(message, chunks);
    EXPECT_EQ(std::vector<double>(out.begin(), out.end()), data);
  }
  EXPECT_EQ(buffer.use_count(), 1);
}

TEST(SerializeBuffer, ArchiveKeepsTakenMemoryAliveUntilItIsDestroyed) {
  bool freed = false;
  auto memory = std::make_unique<std::uint8_t[]>(8192);
  memory[8191] = 42;
  const std::uint8_t* raw = memory.get();
  std::optional<OutputArchive> ar(std::in_place, with_threshold(chunk_threshold));
  {
    auto buffer = SerializeBuffer<std::uint8_t>::take(memory.release(), 8192, [&freed](std::uint8_t* p) {
      freed = true;
      delete[] p;
    });
    (*ar)(buffer);
  }  // the user's last reference is gone
  EXPECT_FALSE(freed);
  ASSERT_EQ(ar->out_of_line_chunks().size(), 1u);
  EXPECT_EQ(ar->out_of_line_chunks()[0].data, reinterpret_cast<const std::byte*>(raw));
  EXPECT_EQ(std::to_integer<int>(ar->out_of_line_chunks()[0].data[8191]), 42);  // still valid memory
  ar.reset();
  EXPECT_TRUE(freed);
}

TEST(SerializeBuffer, ClearingTheArchiveReleasesItsReferences) {
  auto buffer = SerializeBuffer<std::uint64_t>(1000);
  OutputArchive ar(with_threshold(chunk_threshold));
  ar(buffer);
  EXPECT_EQ(buffer.use_count(), 2);
  ar.clear();
  EXPECT_EQ(buffer.use_count(), 1);
}

TEST(SerializeBuffer, CopyAndVectorOwnTheirElements) {
  std::vector<int> data(2000, 5);
  auto copied = SerializeBuffer<int>::copy(data.data(), data.size());
  EXPECT_NE(copied.data(), data.data());
  data[0] = 6;
  EXPECT_EQ(copied[0], 5);
  const int* elements = data.data();
  SerializeBuffer<int> moved(std::move(data));
  EXPECT_EQ(moved.data(), elements);  // took the vector's storage
  EXPECT_EQ(moved.size(), 2000u);
  SerializeBuffer<int> sized(3);
  EXPECT_EQ(sized[0] + sized[1] + sized[2], 0);
  auto shared = sized;  // copies share
  shared[1] = 9;
  EXPECT_EQ(sized[1], 9);
}

TEST(SerializeBuffer, ReceiverTakesOverAnOwnedLandingBuffer) {
  std::vector<double> data(4096, 3.0);
  OutputArchive ar(with_threshold(chunk_threshold));
  ar(SerializeBuffer<double>::reference(data.data(), data.size()));
  const auto message = ar.flatten();
  // The receiver got the chunk into memory it owns and hands it over.
  auto landing = std::make_shared<std::vector<double>>(data);
  const ReceivedChunk received{{reinterpret_cast<const std::byte*>(landing->data()), landing->size() * sizeof(double)},
                               landing, {}};
  const auto out = decode<SerializeBuffer<double>>(message, {&received, 1});
  EXPECT_EQ(out.data(), landing->data());  // no copy
  EXPECT_EQ(out.size(), data.size());
  const long before = landing.use_count();
  landing.reset();
  EXPECT_GE(before, 2);
  EXPECT_EQ(out[4095], 3.0);  // still alive through the buffer
}

TEST(SerializeBuffer, EmptyBuffer) {
  const auto out = testing::round_trip(SerializeBuffer<float>(), 64);
  EXPECT_TRUE(out.empty());
}

}  // namespace
}  // namespace rdmx::serial
