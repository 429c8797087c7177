// Whether two runs probed one link (core/tuner/netmodel/network.h, same_link): the
// probes below are ones this machine's runs stored (2 ranks, loopback, one
// quiet and two beside two busy programs), in milliseconds.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/tuner/netmodel/run_samples.h"

namespace commtune {
namespace {

nlohmann::json probe(const std::vector<double>& small_ms, const std::vector<double>& large_ms) {
  const auto seconds = [](std::vector<double> ms) {
    for (auto& x : ms) x /= 1e3;
    return ms;
  };
  return {{"bytes", {65536, 4194304}},
          {"seconds", {*std::min_element(small_ms.begin(), small_ms.end()) / 1e3,
                       *std::min_element(large_ms.begin(), large_ms.end()) / 1e3}},
          {"attempts", {seconds(small_ms), seconds(large_ms)}}};
}

TEST(LinkProbes, AQuietProbeIsTrustedAndABusyOneWidensItsBounds) {
  const auto quiet = link_from_probe(probe({0.23, 0.27, 0.45, 0.51, 1.21}, {2.08, 2.33, 2.77, 2.95, 4.26}), 2);
  const auto busy = link_from_probe(probe({0.35, 0.41, 10.3, 12.7, 14.4}, {7.99, 8.03, 8.95, 9.48, 17.5}), 2);
  // The transfer time lies between the large best less the small median (or twice the small best) and the large
  // best.
  EXPECT_NEAR(quiet.slower, 2.08 / (2.08 - 0.23), 1e-9);
  EXPECT_NEAR(quiet.faster, (2.08 - 0.23) / (2.08 - 2 * 0.23), 1e-9);
  EXPECT_EQ(busy.faster, net::kUnbounded);  // its small message's median outwaited the large's best
  EXPECT_GT(quiet.bytes_per_s, 3 * busy.bytes_per_s);  // one loopback, probed 4x apart by the load
  EXPECT_TRUE(net::same_link(quiet, busy));
  // Every attempt of both messages held alike by the scheduler: a bandwidth 14x the quiet probe's from attempts
  // as steady as a quiet link's, bounded from below only, and still one link.
  const auto waited = link_from_probe(probe({3.45, 3.47, 3.50, 3.90, 4.00}, {3.58, 3.60, 3.62, 3.70, 3.75}), 2);
  EXPECT_GT(waited.bytes_per_s, 12 * quiet.bytes_per_s);
  EXPECT_EQ(waited.faster, net::kUnbounded);
  EXPECT_TRUE(net::same_link(quiet, waited));
  // The same quiet probe against a link 50x slower with steady attempts: another link, and so for the busy
  // probe, whose attempts bound it only from below. A 50 Mbit/s shaper's probe as this machine stored it.
  const net::LinkProbe shaped{quiet.bytes_per_s / 50, 1.02, 1.02};
  EXPECT_FALSE(net::same_link(quiet, shaped));
  EXPECT_FALSE(net::same_link(busy, shaped));
  const auto stored = link_from_probe(probe({21.32, 21.48, 21.50, 21.60, 21.37}, {1357.7, 1361.0, 1401.7, 1369.9, 1360.3}), 2);
  EXPECT_FALSE(net::same_link(busy, stored));
  EXPECT_FALSE(net::same_link(waited, stored));
  EXPECT_NE(net::describe_link_difference(busy, stored).find("or more) against"), std::string::npos);
  // Ten times apart: another link when both probes were steady, one link when one may be 2.5x off either way.
  EXPECT_FALSE(net::same_link({1e9, 1.0, 1.0}, {1e8, 1.0, 1.0}));
  EXPECT_TRUE(net::same_link({1e9, 2.5, 2.5}, {1e8, 1.0, 1.0}));
}

TEST(LinkProbes, AnUnprobedOrOlderProbeIsTakenAsItCan) {
  EXPECT_TRUE(net::same_link({0, 1, 1}, {1e6, 1, 1}));  // not probed: the other's link
  // Runs stored before attempts were: their best times alone, trusted as steady.
  auto older = probe({0.23}, {2.08});
  older.erase("attempts");
  const auto link = link_from_probe(older, 2);
  EXPECT_GT(link.bytes_per_s, 0);
  EXPECT_EQ(link.slower, 1.0);
  EXPECT_EQ(link.faster, 1.0);
  // Bad values tell nothing rather than something wrong.
  auto bad = probe({0.23, 0.3}, {2.08, -1});  // its attempts cannot be read: its best times alone
  EXPECT_EQ(link_from_probe(bad, 2).faster, 1.0);
  bad["bytes"] = {1, "x"};
  EXPECT_EQ(link_from_probe(bad, 2).bytes_per_s, 0);
  EXPECT_EQ(link_from_probe(probe({0.2}, {2.0}), 1).bytes_per_s, 0);  // one rank has no link
  EXPECT_EQ(link_from_probe(nullptr, 2).bytes_per_s, 0);
}

}  // namespace
}  // namespace commtune
