#include "core/tuner/config/command_line.h"

#include <algorithm>
#include <cctype>

#include "core/tuner/schema/param_schema.h"

namespace commtune {

namespace {

bool blank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

bool plain(char c) {
  const auto u = static_cast<unsigned char>(c);
  return std::isalnum(u) || std::string_view("-_./=:,+@%").find(c) != std::string_view::npos;
}

}  // namespace

std::vector<std::string> split_command_line(std::string_view text, const std::string& field, std::size_t max_chars) {
  if (text.size() > max_chars)
    throw ConfigError(field, "is " + std::to_string(text.size()) + " characters, over " + std::to_string(max_chars));
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (blank(c)) {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
      continue;
    }
    in_word = true;
    if (c == '\\') {
      if (++i == text.size()) throw ConfigError(field, "ends in a backslash, which escapes nothing");
      word += text[i];
    } else if (c == '\'') {
      const auto end = text.find('\'', i + 1);
      if (end == std::string_view::npos)
        throw ConfigError(field, "has a ' at character " + std::to_string(i + 1) + " that is never closed");
      word.append(text.substr(i + 1, end - i - 1));
      i = end;
    } else if (c == '"') {
      const auto open = i;
      for (++i;; ++i) {
        if (i == text.size())
          throw ConfigError(field, "has a \" at character " + std::to_string(open + 1) + " that is never closed");
        if (text[i] == '"') break;
        if (text[i] == '\\' && i + 1 < text.size() && std::string_view("\"\\$`").find(text[i + 1]) != std::string_view::npos)
          ++i;
        word += text[i];
      }
    } else {
      word += c;
    }
  }
  if (in_word) words.push_back(std::move(word));
  return words;
}

std::string join_command_line(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) {
    if (!out.empty()) out += ' ';
    if (!w.empty() && std::all_of(w.begin(), w.end(), plain)) {
      out += w;
      continue;
    }
    out += '\'';
    for (const char c : w) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    out += '\'';
  }
  return out;
}

}  // namespace commtune
