#include "core/tuner/io/error_text.h"

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

std::string raised_by_model(const std::string& text) {
  if (text.find("ops.prim.RaiseException(") == std::string::npos) return "";
  std::string last, where;
  bool original = false;  // in the traceback of the model's own source, which follows the serialized code's
  std::size_t at = 0;
  while (at <= text.size()) {
    const auto end = std::min(text.find('\n', at), text.size());
    auto line = text.substr(at, end - at);
    while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.pop_back();
    at = end + 1;
    if (line.rfind("Traceback of TorchScript, original code", 0) == 0) original = true;
    const auto file = line.find("File \"");
    if (original && file != std::string::npos) {
      // '  File "/tmp/model.py", line 8, in forward' -> '/tmp/model.py, line 8, in forward'
      auto rest = line.substr(file + 6);
      const auto quote = rest.find('"');
      if (quote != std::string::npos) where = rest.substr(0, quote) + rest.substr(quote + 1);
    }
    if (line.find_first_not_of(' ') != std::string::npos) last = line;
  }
  // The last line: "builtins.ValueError: the message" (or a class of the model's own module).
  auto kind = last.substr(0, last.find(": "));
  auto message = last.find(": ") == std::string::npos ? last : last.substr(last.find(": ") + 2);
  if (kind.rfind("builtins.", 0) == 0) kind.erase(0, 9);
  return message + " (" + kind + " raised" + (where.empty() ? "" : " at " + where) + ")";
}

}  // namespace commtune
