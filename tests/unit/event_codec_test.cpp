#include <gtest/gtest.h>

#include "core/tuner/events/event_codec.h"

using namespace commtune::events;

namespace {

StepRecord sample_step(std::int64_t step) {
  StepRecord r;
  r.step = step;
  r.loss = 2.5 / (step + 1);
  r.lr = 0.1;
  r.times = {0.001, 0.002, 0.003, 0.004, 0.0005, 0.006, 0.0165};
  r.wire_bytes = 1234567;
  r.uncompressed_bytes = 7654321;
  r.stats = {{"compression_rate", 12.5}, {"residual_norm", 0.25}};
  r.bucket_stats = {{0, "rate", 3.0}, {7, "rate", 4.0}};
  return r;
}

std::string stream_of(int steps) {
  Encoder enc;
  std::string out;
  enc.hello(out, Hello{kProtocolVersion, 3, 4, 999});
  enc.message(out, {{"kind", "run_start"}, {"rank", 3}});
  for (int s = 0; s < steps; ++s) enc.step(out, sample_step(s));
  enc.message(out, {{"kind", "run_end"}});
  return out;
}

TEST(EventCodec, RoundTripsEveryFrame) {
  Decoder dec;
  const auto events = dec.feed(stream_of(3));
  ASSERT_EQ(events.size(), 6u);
  const auto& hello = std::get<Hello>(events[0].payload);
  EXPECT_EQ(hello.rank, 3u);
  EXPECT_EQ(hello.world_size, 4u);
  EXPECT_EQ(hello.pid, 999u);
  EXPECT_EQ(events[1].kind(), "run_start");
  for (int s = 0; s < 3; ++s) {
    const auto* r = events[2 + s].step();
    ASSERT_NE(r, nullptr);
    const auto want = sample_step(s);
    EXPECT_EQ(r->step, want.step);
    EXPECT_EQ(r->loss, want.loss);
    EXPECT_EQ(r->times.total, want.times.total);
    EXPECT_EQ(r->times.hook, want.times.hook);
    EXPECT_EQ(r->wire_bytes, want.wire_bytes);
    EXPECT_EQ(r->uncompressed_bytes, want.uncompressed_bytes);
    ASSERT_EQ(r->stats.size(), 2u);
    EXPECT_EQ(r->stats[1].name, "residual_norm");
    EXPECT_EQ(r->stats[1].value, 0.25);
    ASSERT_EQ(r->bucket_stats.size(), 2u);
    EXPECT_EQ(r->bucket_stats[1].bucket, 7u);
    EXPECT_EQ(r->bucket_stats[1].name, "rate");
    EXPECT_EQ(events[2 + s].rank, 3);
  }
  EXPECT_EQ(events[5].kind(), "run_end");
}

TEST(EventCodec, NamesAreSentOnce) {
  std::string one, many;
  Encoder a, b;
  a.step(one, sample_step(0));
  b.step(many, sample_step(0));
  const auto first = many.size();
  b.step(many, sample_step(1));
  EXPECT_LT(many.size() - first, one.size()) << "a second step must not repeat the stat names";
}

TEST(EventCodec, AcceptsBytesInAnyPieces) {
  const auto stream = stream_of(5);
  Decoder dec;
  std::size_t count = 0;
  for (char c : stream) count += dec.feed(std::string_view(&c, 1)).size();
  EXPECT_EQ(count, 8u);
  EXPECT_FALSE(dec.has_partial_frame());
}

TEST(EventCodec, RejectsForeignAndMismatchedStreams) {
  Decoder foreign;
  EXPECT_THROW(foreign.feed(std::string("GET / HTTP/1.1\r\n\r\n")), ProtocolError);

  std::string future;
  Encoder().hello(future, Hello{kProtocolVersion + 1, 0, 1, 1});
  Decoder dec;
  try {
    dec.feed(future);
    FAIL() << "a newer protocol version must be refused";
  } catch (const ProtocolError& e) {
    EXPECT_NE(std::string(e.what()).find("version"), std::string::npos);
  }

  std::string headless;
  Encoder().step(headless, sample_step(0));
  EXPECT_THROW(Decoder().feed(headless), ProtocolError);
}

}  // namespace
