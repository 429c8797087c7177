// libFuzzer target: parse_bounded_json (db/json_text.h), which every reader
// of the store and of outside JSON calls. Its quick path must give exactly
// what nlohmann's parser gives for the same bytes (the value, each number's
// type and bits), or leave the text to it; the depth bound must hold, and a
// text repeating a key in an object is refused.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "db/json_text.h"
#include "tests/support/same_json.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (const int max_depth : {commtune::kMaxJsonDepth, 3}) {
    const auto parsed = commtune::parse_bounded_json(text, max_depth);
    if (!commtune::testing::same_json(parsed, commtune::testing::reference_json(text, max_depth))) __builtin_trap();
  }
  return 0;
}
