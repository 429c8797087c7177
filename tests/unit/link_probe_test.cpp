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

TEST(LinkProbes, AQuietProbeIsTrustedAndABusyOneWidensTheFactor) {
  const auto quiet = link_from_probe(probe({0.23, 0.27, 0.45, 0.51, 1.21}, {2.08, 2.33, 2.77, 2.95, 4.26}), 2);
  const auto busy = link_from_probe(probe({0.35, 0.41, 10.3, 12.7, 14.4}, {7.99, 8.03, 8.95, 9.48, 17.5}), 2);
  EXPECT_NEAR(quiet.spread, 2.77 / 2.08, 1e-9);
  EXPECT_NEAR(busy.spread, 8.95 / 7.99, 1e-9);
  EXPECT_GT(quiet.bytes_per_s, 3 * busy.bytes_per_s);  // one loopback, probed 4x apart by the load
  EXPECT_TRUE(net::same_link(quiet, busy));
  // The same quiet probe against a link 50x slower with as steady attempts: another link.
  const net::LinkProbe shaped{quiet.bytes_per_s / 50, 1.02};
  EXPECT_FALSE(net::same_link(quiet, shaped));
  // Ten times apart: another link when both probes were steady, one link when each wavered 2.5x.
  EXPECT_FALSE(net::same_link({1e9, 1.0}, {1e8, 1.0}));
  EXPECT_TRUE(net::same_link({1e9, 2.5}, {1e8, 1.0}));
}

TEST(LinkProbes, AnUnprobedOrOlderProbeIsTakenAsItCan) {
  EXPECT_TRUE(net::same_link({0, 1}, {1e6, 1}));  // not probed: the other's link
  // Runs stored before attempts were: their best times alone, trusted as steady.
  auto older = probe({0.23}, {2.08});
  older.erase("attempts");
  const auto link = link_from_probe(older, 2);
  EXPECT_GT(link.bytes_per_s, 0);
  EXPECT_EQ(link.spread, 1.0);
  // Bad values tell nothing rather than something wrong.
  auto bad = probe({0.23, 0.3}, {2.08, -1});
  EXPECT_EQ(link_from_probe(bad, 2).spread, 1.0);
  bad["bytes"] = {1, "x"};
  EXPECT_EQ(link_from_probe(bad, 2).bytes_per_s, 0);
  EXPECT_EQ(link_from_probe(probe({0.2}, {2.0}), 1).bytes_per_s, 0);  // one rank has no link
  EXPECT_EQ(link_from_probe(nullptr, 2).bytes_per_s, 0);
}

}  // namespace
}  // namespace commtune
