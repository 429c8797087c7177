#include "core/tuner/config/world_groups.h"

#include <algorithm>

#include "core/tuner/schema/param_schema.h"

namespace commtune {

void check_group_size(int world_size, int size, const std::string& field) {
  if (size < 1 || world_size % size != 0)
    throw ConfigError(field,
                      "must divide the world size " + std::to_string(world_size) + ", got " + std::to_string(size));
}

std::vector<AveragingPeriod> hierarchy_levels(const std::string& text, int world) {
  std::vector<AveragingPeriod> levels;
  std::size_t start = 0;
  const auto fail = [&](const std::string& problem) {
    throw ConfigError("hook.hierarchy", problem + ", got \"" + text + "\"");
  };
  const auto whole_number = [&](const std::string& digits) {
    if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos)
      fail("wants whole numbers in period:group_size");
    return std::stoll(digits);
  };
  while (start < text.size()) {
    const auto end = std::min(text.find(',', start), text.size());
    const auto item = text.substr(start, end - start);
    const auto colon = item.find(':');
    if (colon == std::string::npos) fail("wants period:group_size pairs separated by commas");
    const AveragingPeriod level{whole_number(item.substr(0, colon)), whole_number(item.substr(colon + 1))};
    if (level.period < 1 || level.group_size < 1 || (world > 0 && world % level.group_size != 0))
      fail(world > 0 ? "wants periods >= 1 and group sizes that divide the world size " + std::to_string(world)
                     : std::string("wants periods and group sizes >= 1"));
    if (!levels.empty() && level.period <= levels.back().period) fail("wants increasing periods");
    levels.push_back(level);
    start = end + 1;
  }
  if (world > 0 && !levels.empty() && levels.back().group_size != world)
    fail("wants the last group size equal to the world size " + std::to_string(world));
  return levels;
}

}  // namespace commtune
