// JSON from outside (event messages, configuration and summary files, the
// store's own rows), parsed with a bound on its nesting. nlohmann's
// serializer and several readers recurse once per level: a document nested
// a million deep is a crash, not an error, unless it is refused first.
// Header-only (nlohmann alone), in the store library, the lowest layer that
// reads such JSON: the engine above it includes it from here.
#pragma once

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_set>
#include <vector>

#include <nlohmann/json.hpp>

namespace commtune {

// Deeper than anything commtune writes (a run_start message nests 4 deep).
inline constexpr int kMaxJsonDepth = 64;

// How deep arrays and objects nest in `text`, counted without parsing
// (brackets inside strings skipped); stops counting past `limit`.
inline int json_nesting_depth(std::string_view text, int limit = kMaxJsonDepth) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') {
      if (++depth > deepest && (deepest = depth) > limit) return deepest;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

namespace detail {

// JSON as commtune writes it, parsed in one pass, twice as fast as
// nlohmann's parser (which copies every token into a buffer first), more
// with the repeated-key callback below (1 KB: 7.2 us vs 14.0, 20.3 with it;
// 1 MB: 8.3 ms vs 16.5, 19.9; bench/byhand/json_bench.cpp, 2026-12-02): a
// store of 10^5 runs holds 2*10^5 such texts. It takes strings without escapes or
// bytes above 0x7f, numbers that fit their type, objects without a repeated
// key, no comments; on anything else parse() returns false and the text is
// left to nlohmann's parser. So whatever it returns is what nlohmann's
// parser returns for the same text (tests/fuzz/fuzz_json_text.cpp).
class QuickJson {
 public:
  QuickJson(std::string_view text, int max_depth)
      : at_(text.data()), end_(text.data() + text.size()), max_depth_(max_depth) {}

  bool parse(nlohmann::json& out) {
    if (max_depth_ < 0) return false;  // no value is shallow enough: the prescan says so
    if (!value(out, 0)) return false;
    skip_space();
    return at_ == end_;
  }

 private:
  void skip_space() {
    while (at_ != end_ && (*at_ == ' ' || *at_ == '\n' || *at_ == '\r' || *at_ == '\t')) ++at_;
  }

  bool next_is(char c) {
    skip_space();
    if (at_ == end_ || *at_ != c) return false;
    ++at_;
    return true;
  }

  bool literal(std::string_view word) {
    if (static_cast<std::size_t>(end_ - at_) < word.size() || std::string_view(at_, word.size()) != word) return false;
    at_ += word.size();
    return true;
  }

  bool string(std::string& out) {  // past the opening quote
    for (const char* start = at_; at_ != end_; ++at_) {
      const auto c = static_cast<unsigned char>(*at_);
      if (c == '"') {
        out.assign(start, at_++);
        return true;
      }
      if (c == '\\' || c < 0x20 || c >= 0x80) return false;  // escapes, controls, UTF-8: nlohmann's
    }
    return false;
  }

  static bool digit(const char* p, const char* end) { return p != end && *p >= '0' && *p <= '9'; }

  // RFC 8259's grammar; an integer that does not fit 64 bits, or a real
  // that over- or underflows, is nlohmann's to judge.
  bool number(nlohmann::json& out) {
    const char* start = at_;
    const char* p = at_;
    const bool negative = p != end_ && *p == '-';
    if (negative) ++p;
    if (!digit(p, end_)) return false;
    if (*p == '0')
      ++p;
    else
      while (digit(p, end_)) ++p;
    bool integer = true;
    if (p != end_ && *p == '.') {
      integer = false;
      if (!digit(++p, end_)) return false;
      while (digit(p, end_)) ++p;
    }
    if (p != end_ && (*p == 'e' || *p == 'E')) {
      integer = false;
      if (++p != end_ && (*p == '+' || *p == '-')) ++p;
      if (!digit(p, end_)) return false;
      while (digit(p, end_)) ++p;
    }
    at_ = p;
    const auto read = [&](auto v) {
      const auto r = std::from_chars(start, p, v);
      if (r.ec != std::errc() || r.ptr != p) return false;
      out = v;
      return true;
    };
    if (!integer) return read(0.0);
    return negative ? read(std::int64_t{0}) : read(std::uint64_t{0});
  }

  // Past an opening bracket, one level deeper: false beyond the depth bound.
  bool enter(int& depth) {
    ++at_;
    return ++depth <= max_depth_;
  }

  bool value(nlohmann::json& out, int depth) {
    skip_space();
    if (at_ == end_) return false;
    switch (*at_) {
      case '{': {
        if (!enter(depth)) return false;
        out = nlohmann::json::object();
        auto& members = out.get_ref<nlohmann::json::object_t&>();
        if (next_is('}')) return true;
        std::string key;
        do {
          if (!next_is('"') || !string(key) || !next_is(':')) return false;
          // Keys come in order from nlohmann's own dump: each is put at the end.
          auto slot = members.end();
          if (members.empty() || members.rbegin()->first < key) {
            slot = members.emplace_hint(members.end(), std::move(key), nullptr);
          } else {
            const auto [at, added] = members.try_emplace(std::move(key), nullptr);
            if (!added) return false;  // a repeated key
            slot = at;
          }
          if (!value(slot->second, depth)) return false;
        } while (next_is(','));
        return next_is('}');
      }
      case '[': {
        if (!enter(depth)) return false;
        out = nlohmann::json::array();
        auto& items = out.get_ref<nlohmann::json::array_t&>();
        if (next_is(']')) return true;
        do {
          if (!value(items.emplace_back(), depth)) return false;
        } while (next_is(','));
        return next_is(']');
      }
      case '"': {
        ++at_;
        std::string text;
        if (!string(text)) return false;
        out = std::move(text);
        return true;
      }
      case 't':
        out = true;
        return literal("true");
      case 'f':
        out = false;
        return literal("false");
      case 'n':
        out = nullptr;
        return literal("null");
      default:
        return number(out);
    }
  }

  const char* at_;
  const char* end_;
  int max_depth_;
};

}  // namespace detail

// `text` as JSON and, when it is not (nlohmann's parser refuses it, an
// object repeats a key, or arrays and objects nest deeper than
// `max_depth`), a discarded value and why, in one line. nlohmann's parser
// keeps a repeated key's last value without a word; a document that says
// two things of one key says nothing for sure, so it is refused.
struct JsonText {
  nlohmann::json json;
  std::string problem;  // "" when `json` holds the text's value
};

inline JsonText parse_json_text(std::string_view text, int max_depth = kMaxJsonDepth) {
  JsonText out;
  if (detail::QuickJson(text, max_depth).parse(out.json)) return out;
  out.json = nlohmann::json(nlohmann::json::value_t::discarded);
  if (json_nesting_depth(text, max_depth) > max_depth) {
    out.problem = "it nests arrays or objects more than " + std::to_string(max_depth) + " deep";
    return out;
  }
  // The keys of each object being read, innermost last.
  std::vector<std::unordered_set<std::string>> keys;
  std::string repeated;
  const nlohmann::json::parser_callback_t watch_keys = [&](int, nlohmann::json::parse_event_t event,
                                                           nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    if (event == Event::object_start) {
      keys.emplace_back();
    } else if (event == Event::object_end) {
      keys.pop_back();
    } else if (event == Event::key && !keys.empty()) {
      const auto& key = parsed.get_ref<const std::string&>();
      if (!keys.back().insert(key).second && repeated.empty()) repeated = key;
    }
    return true;
  };
  try {
    auto json = nlohmann::json::parse(text, watch_keys, /*allow_exceptions=*/true, /*ignore_comments=*/true);
    if (!repeated.empty()) {
      out.problem = "an object in it repeats the key " + nlohmann::json(repeated).dump() + " (which value is meant?)";
      return out;
    }
    out.json = std::move(json);
  } catch (const nlohmann::json::exception& e) {
    // "[json.exception.out_of_range.406] number overflow parsing '1e400'": the words after the tag.
    std::string_view what = e.what();
    if (const auto tag_end = what.find("] "); what.rfind("[json.exception", 0) == 0 && tag_end != what.npos)
      what.remove_prefix(tag_end + 2);
    out.problem = std::string(what);
  }
  return out;
}

// `text` as JSON, or a discarded value (is_discarded()) when it is not JSON
// (parse_json_text says why).
inline nlohmann::json parse_bounded_json(std::string_view text, int max_depth = kMaxJsonDepth) {
  return parse_json_text(text, max_depth).json;
}

}  // namespace commtune
