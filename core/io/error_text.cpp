#include "core/io/error_text.h"

#include <algorithm>

namespace commtune {

std::string one_line_error(const std::string& text) {
  std::string first, raised;
  std::size_t at = 0;
  while (at <= text.size()) {
    const auto end = std::min(text.find('\n', at), text.size());
    auto line = text.substr(at, end - at);
    while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.pop_back();
    if (first.empty() && line.find_first_not_of(' ') != std::string::npos) first = line.substr(line.find_first_not_of(' '));
    if (line.rfind("RuntimeError: ", 0) == 0) raised = line.substr(14);
    at = end + 1;
  }
  auto out = raised.empty() ? first : raised;
  // libtorch's checks put where they failed first: "[enforce fail at inline_container.cc:230] . Attempted ..."
  if (out.rfind("[enforce fail at ", 0) == 0 && out.find("] ") != std::string::npos) {
    out.erase(0, out.find("] ") + 2);
    if (out.rfind(". ", 0) == 0) out.erase(0, 2);
  }
  return out;
}

}  // namespace commtune
