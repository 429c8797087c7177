// A run's step profile as it stores it when it ends (RunSamples::encode,
// RunSamples::decode): read back bit for bit, and bytes that are not one
// whole profile are none (the run's steps answer instead).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "core/tuner/netmodel/run_samples.h"

namespace commtune {
namespace {

std::uint64_t bits(double v) {
  std::uint64_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

std::vector<std::uint64_t> bits(const std::vector<double>& v) {
  std::vector<std::uint64_t> out;
  for (const double x : v) out.push_back(bits(x));
  return out;
}

// Three steady steps of two ranks, with what a run leaves unreported (NaN) and a collective outside buckets.
RunSamples profile() {
  RunSamples s;
  s.run_id = 7;
  s.world_size = 2;
  s.steps = {4, 5, 7};
  s.data = {1e-4, 2e-4, 3e-4};
  s.forward = {0.01, 0.011, 0.0105};
  s.backward = {0.02, 0.021, 0.019};
  s.pure_backward = {0.018, 0.02, 0.017};
  s.optimizer = {0.001, 0.0011, 0.0009};
  s.hook = {0.002, 0.0021, 0.0019};
  s.hook_inline = {0.0005, 0.0, 0.0004};
  s.total = {0.04, 0.041, 0.039};
  s.wire_bytes = {1.5e6, 1.5e6, 1.25e6};
  s.uncompressed_bytes = {6e6, 6e6, 6e6};
  s.ready = {{0, {0.001, NAN, 0.0012}}, {1, {0.004, 0.0041, 0.0039}}};
  s.chain = {{0, {0.003, 0.0031, NAN}}};
  s.work = {{-1, {1e-5, 2e-5, 3e-5}}, {0, {5e-4, 6e-4, 7e-4}}};
  s.serial_hook = true;
  s.link = {1.25e8, 1.3, 2.1};
  s.collectives.push_back({net::Collective::Allreduce, {}, 0, {1e6, 1e6, NAN}, {1, 1, NAN}, {1e-3, 2e-3, NAN}});
  s.collectives.push_back({net::Collective::PushPull, {2, 1}, db::kWholeStep, {0, 5e5, 0}, {0, 1, 0}, {0, 4e-3, 0}});
  s.bucket_fp32_bytes = {{0, 4e6}, {1, 2e6}};
  return s;
}

void expect_same(const RunSamples& a, const RunSamples& b) {
  EXPECT_EQ(a.world_size, b.world_size);
  EXPECT_EQ(a.steps, b.steps);
  for (const auto field : {&RunSamples::data, &RunSamples::forward, &RunSamples::backward, &RunSamples::pure_backward,
                           &RunSamples::optimizer, &RunSamples::hook, &RunSamples::hook_inline, &RunSamples::total,
                           &RunSamples::wire_bytes, &RunSamples::uncompressed_bytes})
    EXPECT_EQ(bits(a.*field), bits(b.*field));
  for (const auto field : {&RunSamples::ready, &RunSamples::chain, &RunSamples::work}) {
    ASSERT_EQ((a.*field).size(), (b.*field).size());
    for (const auto& [bucket, series] : a.*field) EXPECT_EQ(bits(series), bits((b.*field).at(bucket))) << bucket;
  }
  EXPECT_EQ(a.serial_hook, b.serial_hook);
  EXPECT_EQ(bits(a.link.bytes_per_s), bits(b.link.bytes_per_s));
  EXPECT_EQ(bits(a.link.slower), bits(b.link.slower));
  EXPECT_EQ(bits(a.link.faster), bits(b.link.faster));
  ASSERT_EQ(a.collectives.size(), b.collectives.size());
  for (std::size_t k = 0; k < a.collectives.size(); ++k) {
    const auto &x = a.collectives[k], &y = b.collectives[k];
    EXPECT_EQ(x.kind, y.kind);
    EXPECT_EQ(x.group, y.group);
    EXPECT_EQ(x.bucket, y.bucket);
    EXPECT_EQ(bits(x.bytes), bits(y.bytes));
    EXPECT_EQ(bits(x.calls), bits(y.calls));
    EXPECT_EQ(bits(x.seconds), bits(y.seconds));
  }
  EXPECT_EQ(a.bucket_fp32_bytes, b.bucket_fp32_bytes);
}

TEST(StoredProfiles, AreReadBackBitForBitAndGiveTheSameProfile) {
  const auto s = profile();
  const auto bytes = s.encode();
  const auto back = RunSamples::decode(bytes, 42, 2);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->run_id, 42);  // the run's id is the row's, not the bytes'
  expect_same(s, *back);
  EXPECT_EQ(back->encode(), bytes);
  const auto p = s.profile(), q = back->profile();
  EXPECT_EQ(bits(p.hook_s), bits(q.hook_s));
  EXPECT_EQ(bits(p.backward_s), bits(q.backward_s));
  EXPECT_EQ(p.buckets.size(), q.buckets.size());
}

TEST(StoredProfiles, BytesThatAreNotOneWholeProfileAreNone) {
  const auto bytes = profile().encode();
  EXPECT_FALSE(RunSamples::decode("", 1, 2));
  for (std::size_t size = 0; size < bytes.size(); ++size)  // every truncation
    EXPECT_FALSE(RunSamples::decode(std::string_view(bytes).substr(0, size), 1, 2)) << size;
  EXPECT_FALSE(RunSamples::decode(bytes + '\0', 1, 2));  // trailing bytes

  auto other_format = bytes;
  other_format[4] = static_cast<char>(RunSamples::kStoredFormat + 1);  // profiles derived another way
  EXPECT_FALSE(RunSamples::decode(other_format, 1, 2));
  auto not_ours = bytes;
  not_ours[0] = 'X';
  EXPECT_FALSE(RunSamples::decode(not_ours, 1, 2));

  // A step count claiming 2^32 - 1 steps is refused before anything is allocated for them.
  auto huge = bytes;
  const std::size_t count_at = 4 + 4 + 4 + 1 + 8 + 8 + 8;  // magic, format, world_size, serial_hook, the link
  for (std::size_t i = 0; i < 4; ++i) huge[count_at + i] = '\xff';
  EXPECT_FALSE(RunSamples::decode(huge, 1, 2));

  auto no_rank = bytes;
  for (std::size_t i = 0; i < 4; ++i) no_rank[8 + i] = '\0';  // world_size 0
  EXPECT_FALSE(RunSamples::decode(no_rank, 1, 2));
  EXPECT_FALSE(RunSamples::decode(bytes, 1, 1000));  // a profile of other ranks than its run had

  // What from_store never writes.
  auto unordered = profile();
  unordered.steps = {5, 4, 7};  // steps out of order
  EXPECT_FALSE(RunSamples::decode(unordered.encode(), 1, 2));
  RunSamples one_step;
  one_step.world_size = 2;
  one_step.steps = {3};  // from_store profiles four steps or more: two steady ones at least
  for (const auto field : {&RunSamples::data, &RunSamples::forward, &RunSamples::backward, &RunSamples::pure_backward,
                           &RunSamples::optimizer, &RunSamples::hook, &RunSamples::hook_inline, &RunSamples::total,
                           &RunSamples::wire_bytes, &RunSamples::uncompressed_bytes})
    one_step.*field = {0.5};
  EXPECT_FALSE(RunSamples::decode(one_step.encode(), 1, 2));
  auto no_bandwidth = profile();
  no_bandwidth.link.bytes_per_s = NAN;
  EXPECT_FALSE(RunSamples::decode(no_bandwidth.encode(), 1, 2));
  auto no_group = profile();
  no_group.collectives.back().group.stride = 0;  // a group whose ranks are 0 apart
  EXPECT_FALSE(RunSamples::decode(no_group.encode(), 1, 2));
}

}  // namespace
}  // namespace commtune
