// How a hook's groups of ranks must fit the world: checked by the tuner when
// it plans a run for a number of ranks, and by the hooks that build the groups.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace commtune {

// Throws ConfigError naming `field` unless `size` divides the world size.
void check_group_size(int world_size, int size, const std::string& field);

// One level of HierarchicalModelAverager: every `period` steps, parameters
// are averaged within groups of `group_size` consecutive ranks.
struct AveragingPeriod {
  std::int64_t period = 0;
  std::int64_t group_size = 0;
};

// hook.hierarchy ("2:2,8:4") as HierarchicalModelAverager checks it: with a
// world size (> 0), also that the group sizes divide it and the last is it.
// Throws ConfigError naming hook.hierarchy.
std::vector<AveragingPeriod> hierarchy_levels(const std::string& text, int world = 0);

}  // namespace commtune
