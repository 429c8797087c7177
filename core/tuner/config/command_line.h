// A command line as one line of text, as a shell reads it: words split at
// blanks, 'single quotes' literal, "double quotes" with \" \\ \$ \` escaped,
// a backslash outside quotes taking the next character as it is. No
// expansion of any kind. The app's script-arguments field is read this way,
// and shown in the form that reads back to the same words.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace commtune {

// Throws ConfigError naming `field` for an unclosed quote, a trailing
// backslash, or a text over `max_chars` (checked before anything is read).
std::vector<std::string> split_command_line(std::string_view text, const std::string& field,
                                            std::size_t max_chars = 1 << 20);

// The words as a line split_command_line reads back to them: a word with
// anything but letters, digits and -_./=:,+@% is single-quoted.
std::string join_command_line(const std::vector<std::string>& words);

}  // namespace commtune
