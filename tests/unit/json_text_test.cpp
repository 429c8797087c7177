// parse_bounded_json's quick path (db/json_text.h) against nlohmann's parser:
// every text gives what nlohmann gives, and the texts commtune writes take
// the quick path (tests/fuzz/fuzz_json_text.cpp tries arbitrary bytes).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "db/json_text.h"
#include "tests/support/same_json.h"

namespace {

using commtune::kMaxJsonDepth;
using commtune::parse_bounded_json;
using commtune::testing::same_json;

nlohmann::json reference(const std::string& text, int max_depth = kMaxJsonDepth) {
  return commtune::testing::reference_json(text, max_depth);
}

bool quick(const std::string& text, int max_depth = kMaxJsonDepth) {
  nlohmann::json out;
  return commtune::detail::QuickJson(text, max_depth).parse(out);
}

std::string nested(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

TEST(JsonTextTest, WhatCommtuneWritesTakesTheQuickPathAndParsesAsNlohmannDoes) {
  const nlohmann::json written = {
      {"hook", {{"name", "powersgd"}, {"matrix_approximation_rank", 4}, {"start_powerSGD_iter", 2}}},
      {"optimizer", {{"lr", 0.05000001}, {"momentum", 0.9}, {"weight_decay", 0.0}, {"nesterov", false}}},
      {"seed", -3},
      {"big", 18446744073709551615ull},
      {"small", -9223372036854775807ll - 1},
      {"tiny", 4.9406564584124654e-324},
      {"negative_zero", -0.0},
      {"link_probe", {{"bytes", {65536, 4194304}}, {"seconds", {0.000376829, 1e-300, 1.7976931348623157e308}}}},
      {"empty", nlohmann::json::object()},
      {"none", nlohmann::json::array()},
      {"null", nullptr},
      {"text", "a b\x7f~"}};
  for (const auto& text : {written.dump(), written.dump(2)}) {
    EXPECT_TRUE(quick(text)) << text;
    EXPECT_TRUE(same_json(parse_bounded_json(text), reference(text))) << text;
    EXPECT_EQ(parse_bounded_json(text), written) << text;  // by value: 4 is read unsigned, written signed
  }
}

TEST(JsonTextTest, EverythingElseIsLeftToNlohmannAndGivesWhatItGives) {
  const std::vector<std::string> texts = {
      "",
      " ",
      "{\"a\": \"\\u00e9\\n\"}",         // escapes
      "{\"a\": \"\xc3\xa9\"}",           // UTF-8
      "{\"a\": \"\xff\"}",               // not UTF-8
      "{\"a\": \"x\ty\"}",               // a raw control character
      "{\"a\": 1, \"a\": 2}",            // a repeated key
      "{\"b\": 1, \"a\": 2, \"b\": 3}",  // repeated out of order
      "{\"b\": 1, \"a\": 2}",            // out of order
      "// a comment\n{\"a\": 1}",
      "{\"a\": 1 /* inline */}",
      "18446744073709551616",  // past 64 bits: a real for nlohmann
      "-9223372036854775809",
      "1e400",
      "-1e400",
      "1e-400",
      "2.2250738585072011e-308",
      "01",
      "1.",
      ".5",
      "-",
      "+1",
      "1e",
      "1E+5",
      "-0",
      "-0.0",
      "0e0",
      "[1,]",
      "{\"a\":1,}",
      "{\"a\" 1}",
      "[1 2]",
      "tru",
      "NaN",
      "[1, 2",  // truncated
      "{\"a\": ",
      "nul",
      "true false",
      "{}x",
      "\xef\xbb\xbf{}",  // a byte-order mark
      std::string("{\"a\":\0}", 7),
      nested(kMaxJsonDepth),
      nested(kMaxJsonDepth + 1),
      "[" + nested(kMaxJsonDepth),
  };
  for (const auto& text : texts) EXPECT_TRUE(same_json(parse_bounded_json(text), reference(text))) << text;
  // What it leaves to nlohmann, it leaves.
  for (const char* text :
       {"{\"a\": \"\\u00e9\"}", "{\"a\": 1, \"a\": 2}", "// c\n1", "18446744073709551616", "1e400", "{}x"})
    EXPECT_FALSE(quick(text)) << text;
  EXPECT_TRUE(quick(nested(kMaxJsonDepth)));
  EXPECT_FALSE(quick(nested(kMaxJsonDepth + 1)));
  EXPECT_TRUE(parse_bounded_json(nested(kMaxJsonDepth + 1)).is_discarded());
  // Keys out of order are put in order, as nlohmann puts them.
  EXPECT_TRUE(quick("{\"b\": 1, \"a\": 2}"));
  EXPECT_EQ(parse_bounded_json("{\"b\": 1, \"a\": 2}"), (nlohmann::json{{"a", 2}, {"b", 1}}));
}

// What is not JSON says why in one line: a repeated key (nlohmann alone keeps
// the last value), a number no double holds, a cut text, too deep a nesting.
TEST(JsonTextTest, ATextThatIsNotJsonSaysWhy) {
  using commtune::parse_json_text;
  const auto problem = [](const std::string& text) { return parse_json_text(text).problem; };
  EXPECT_EQ(problem("{\"hook\": {\"name\": \"fp16\", \"name\": \"allreduce\"}}"),
            "an object in it repeats the key \"name\" (which value is meant?)");
  EXPECT_EQ(problem("{\"a\": 1, \"b\": {\"a\": 2}}"), "");  // the same key in two objects is two keys
  EXPECT_EQ(problem("{\"optimizer\": {\"lr\": 1e400}}"), "number overflow parsing '1e400'");
  EXPECT_NE(problem("{\"a\": ").find("unexpected end of input"), std::string::npos);
  EXPECT_EQ(problem(nested(kMaxJsonDepth + 1)), "it nests arrays or objects more than 64 deep");
  EXPECT_TRUE(parse_json_text("{\"a\": 1, \"a\": 1}").json.is_discarded());
  EXPECT_EQ(parse_json_text("{\"a\": [1, 2]}").json, (nlohmann::json{{"a", {1, 2}}}));
}

}  // namespace
