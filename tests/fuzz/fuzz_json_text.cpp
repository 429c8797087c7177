// libFuzzer target: parse_bounded_json (db/json_text.h), which every reader
// of the store and of outside JSON calls. Its quick path must give exactly
// what nlohmann's parser gives for the same bytes (the value, each number's
// type and bits), or leave the text to it; and the depth bound must hold.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "db/json_text.h"
#include "tests/support/same_json.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (const int max_depth : {commtune::kMaxJsonDepth, 3}) {
    const auto parsed = commtune::parse_bounded_json(text, max_depth);
    const auto reference = commtune::json_nesting_depth(text, max_depth) > max_depth
                               ? nlohmann::json(nlohmann::json::value_t::discarded)
                               : nlohmann::json::parse(text, nullptr, false, true);
    if (!commtune::testing::same_json(parsed, reference)) __builtin_trap();
  }
  return 0;
}
