#include "core/tuner/store/run_query.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <regex>

#include "core/tuner/config/run_config.h"
#include "core/tuner/schema/param_schema.h"

namespace commtune {

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string trim(const std::string& s) {
  const auto first = s.find_first_not_of(" \t\n\r");
  if (first == std::string::npos) return {};
  return s.substr(first, s.find_last_not_of(" \t\n\r") - first + 1);
}

std::string number_text(double value) {
  if (!std::isfinite(value)) return nonfinite_name(value);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.12g", value);
  return buf;
}

std::string optional_text(const std::optional<double>& value) { return value ? number_text(*value) : std::string(); }

// A value at the path of a configuration (hook.matrix_approximation_rank), or null.
const nlohmann::json* at_path(const nlohmann::json& config, const std::string& name) {
  const nlohmann::json* at = &config;
  std::size_t start = 0;
  while (at && at->is_object()) {
    const auto dot = name.find('.', start);
    const auto it = at->find(name.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    at = it == at->end() ? nullptr : &*it;
    if (dot == std::string::npos) return at;
    start = dot + 1;
  }
  return nullptr;
}

bool holds(const std::string& actual, const RunQuery::Condition& c, bool is_tags) {
  if (is_tags && (c.op == "=" || c.op == "!=")) {
    bool has = false;
    std::size_t start = 0;
    while (start <= actual.size()) {
      const auto comma = actual.find(',', start);
      has = has || lower(trim(actual.substr(start, comma == std::string::npos ? std::string::npos : comma - start))) ==
                       lower(c.value);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    return (c.op == "=") == has;
  }
  // Numbers compare as numbers, equal to 9 significant digits (a swept 0.1 + 0.2
  // is 0.3); nan and inf, a diverged run's loss, as words: `loss = nan` finds them.
  const auto a = finite_number(actual), w = finite_number(c.value);
  int order = 0;
  if (a && w) {
    const double scale = std::max(std::abs(*a), std::abs(*w));
    order = std::abs(*a - *w) <= 1e-9 * scale ? 0 : (*a < *w ? -1 : 1);
  } else {
    const auto x = lower(actual), y = lower(c.value);
    order = x < y ? -1 : x > y ? 1 : 0;
  }
  if (c.op == "=") return order == 0;
  if (c.op == "!=") return order != 0;
  if (actual.empty()) return false;  // no value is neither above nor below anything
  if (c.op == "<") return order < 0;
  if (c.op == "<=") return order <= 0;
  if (c.op == ">") return order > 0;
  return order >= 0;
}

}  // namespace

std::optional<double> finite_number(const std::string& text) {
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || !std::isfinite(value)) return std::nullopt;
  return value;
}

const std::vector<std::string>& query_figures() {
  // tail_loss and last_loss, never a bare "loss": the two differ, and a
  // filter must say which it means.
  static const std::vector<std::string> names{"id",        "name",      "sweep", "status", "hook",
                                              "tag",       "ranks",     "steps", "tail_loss", "last_loss",
                                              "ms",        "mb",        "ratio", "wall"};
  return names;
}

std::string param_value_text(const nlohmann::json& value) {
  if (value.is_null()) return {};
  if (value.is_string()) return value.get<std::string>();
  if (value.is_boolean()) return value.get<bool>() ? "true" : "false";
  if (value.is_number_float()) return number_text(value.get<double>());
  return value.dump();
}

namespace {

// A leaf as a parameter: an array whole, as its JSON text.
nlohmann::json param_value(const nlohmann::json& leaf) { return leaf.is_array() ? nlohmann::json(leaf.dump()) : leaf; }

void add_leaves(const nlohmann::json& j, std::string& path, std::vector<std::pair<std::string, nlohmann::json>>& out) {
  if (!j.is_object()) {
    out.emplace_back(path, param_value(j));
    return;
  }
  const auto length = path.size();
  for (const auto& [key, value] : j.items()) {
    if (length) path += '.';
    path += key;
    add_leaves(value, path, out);
    path.resize(length);
  }
}

}  // namespace

std::vector<std::pair<std::string, nlohmann::json>> run_params(const db::RunRecord& run) {
  std::vector<std::pair<std::string, nlohmann::json>> out;
  if (!run.config.is_object()) return out;
  std::string path;
  add_leaves(run.config, path, out);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return out;
}

nlohmann::json run_param(const db::RunRecord& run, const std::string& name) {
  const auto* leaf = at_path(run.config, name);
  return leaf && !leaf->is_object() ? param_value(*leaf) : nlohmann::json();
}

QueryRow query_row(const db::RunRecord& run, const std::string& hook_label, const RunDigest& digest) {
  QueryRow row;
  auto& f = row.figures;
  f["id"] = std::to_string(run.id);
  f["name"] = run.name;
  f["sweep"] = run.sweep_id ? std::to_string(*run.sweep_id) : std::string();
  f["status"] = run.status;
  f["hook"] = hook_label;
  f["tag"] = run.tags;
  f["ranks"] = std::to_string(run.world_size);
  f["steps"] = std::to_string(run.steps_completed);
  f["tail_loss"] = optional_text(digest.loss);
  f["last_loss"] = optional_text(digest.last_loss);
  f["ms"] = optional_text(digest.step_ms);
  f["mb"] = optional_text(digest.wire_mb);
  f["ratio"] = optional_text(digest.compression_ratio);
  f["wall"] = number_text(run.wall_s);
  for (const auto& [name, value] : run_params(run)) row.params[name] = param_value_text(value);
  return row;
}

namespace {

// Every parameter of the schema (loaded plugins included), once each.
std::vector<std::string> parameter_names() {
  const auto schema = describe_schema();
  std::vector<std::string> out;
  const auto add = [&](const nlohmann::json& params, const std::string& prefix) {
    for (const auto& p : params)
      if (auto name = prefix + p["name"].get<std::string>(); std::find(out.begin(), out.end(), name) == out.end())
        out.push_back(std::move(name));
  };
  add(schema["root"], "");
  for (const auto& section : schema["sections"]) {
    const auto prefix = section["section"].get<std::string>() + ".";
    if (section.contains("entries")) out.push_back(prefix + "name");
    add(section.value("params", nlohmann::json::array()), prefix);
    add(section.value("common", nlohmann::json::array()), prefix);
    for (const auto& entry : section.value("entries", nlohmann::json::array())) add(entry["params"], prefix);
  }
  return out;
}

// " (did you mean 'X'?)" for the name closest to one the query does not know, or "".
std::string suggestion(const std::string& name, const std::vector<std::string>& known_params) {
  std::vector<std::string> names = query_figures();
  names.push_back("loss");  // answered with both losses
  const auto params = parameter_names();
  names.insert(names.end(), known_params.begin(), known_params.end());
  names.insert(names.end(), params.begin(), params.end());
  // A parameter named without its section (lr for optimizer.lr) first, then the closest name, then the closest
  // section-less name.
  std::vector<std::string> tails, full;
  for (const auto& n : names)
    if (const auto dot = n.rfind('.'); dot != std::string::npos && name.find('.') == std::string::npos) {
      tails.push_back(n.substr(dot + 1));
      full.push_back(n);
    }
  const auto lower_name = lower(name);
  std::string hint;
  for (std::size_t i = 0; i < tails.size() && hint.empty(); ++i)
    if (lower(tails[i]) == lower_name) hint = full[i];
  // A guess shares at least half the name's letters: a short name is within closest_name's reach of any other.
  const auto alike = [&](const std::string& guess) {
    std::size_t shared = 0;
    for (const char c : lower_name) shared += lower(guess).find(c) != std::string::npos;
    return !guess.empty() && 2 * shared >= lower_name.size();
  };
  if (hint.empty()) hint = closest_name(name, names);
  if (!alike(hint)) hint.clear();
  if (hint.empty()) {
    const auto tail = closest_name(name, tails);
    if (alike(tail)) hint = full[static_cast<std::size_t>(std::find(tails.begin(), tails.end(), tail) - tails.begin())];
  }
  if (hint.empty()) return "";
  if (hint == "loss") return " (did you mean 'tail_loss' or 'last_loss'?)";
  return " (did you mean '" + hint + "'?)";
}

}  // namespace

bool is_parameter_name(const std::string& name) {
  const auto names = parameter_names();
  return std::find(names.begin(), names.end(), name) != names.end();
}

RunQuery RunQuery::parse(const std::string& input, const std::vector<std::string>& known_params) {
  // Before the regex: libstdc++'s matcher recurses per character, and a huge query would overflow the stack.
  constexpr std::size_t kLongest = 4096;
  if (input.size() > kLongest)
    throw QueryError("the query has " + std::to_string(input.size()) + " characters; at most " +
                     std::to_string(kLongest));
  static const std::regex clause(R"(^\s*([A-Za-z_][\w.]*)\s*(==|=|!=|<=|>=|<|>)\s*(.*?)\s*$)");
  RunQuery out;
  std::vector<std::string> words;
  std::size_t start = 0;
  while (start <= input.size()) {
    const auto comma = input.find(',', start);
    const auto part = input.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    start = comma == std::string::npos ? input.size() + 1 : comma + 1;
    std::smatch m;
    if (!std::regex_match(part, m, clause)) {
      if (!trim(part).empty()) words.push_back(trim(part));
      continue;
    }
    Condition c{m[1].str(), false, m[2].str() == "==" ? "=" : m[2].str(), m[3].str()};
    auto key = lower(c.name);
    if (key == "tags") key = "tag";
    const auto& figures = query_figures();
    if (std::find(figures.begin(), figures.end(), key) != figures.end()) {
      c.name = key;
      c.is_figure = true;
    } else if (key == "loss") {
      throw QueryError("no figure 'loss': say tail_loss (the mean over ranks and the last 10% of steps, as tables "
                       "show it) or last_loss (the last step's)");
    } else if (std::find(known_params.begin(), known_params.end(), c.name) == known_params.end() &&
               !is_parameter_name(c.name)) {
      throw QueryError("no figure or parameter '" + c.name + "'" + suggestion(c.name, known_params) +
                       ": use a parameter (hook.matrix_approximation_rank; `commtune-cli params` lists them) or one "
                       "of id, name, sweep, status, hook, tag, ranks, steps, tail_loss, last_loss, ms, mb, ratio, wall");
    }
    if (c.value.empty()) throw QueryError("'" + c.name + " " + c.op + "' needs a value");
    out.conditions_.push_back(std::move(c));
  }
  for (const auto& w : words) out.text_ += (out.text_.empty() ? "" : ", ") + lower(w);
  return out;
}

bool RunQuery::matches(const QueryRow& row) const {
  for (const auto& c : conditions_) {
    const auto& from = c.is_figure ? row.figures : row.params;
    const auto it = from.find(c.name);
    // A run without the parameter (another hook's) differs from every value.
    if (it == from.end() ? c.op != "!=" : !holds(it->second, c, c.is_figure && c.name == "tag")) return false;
  }
  if (text_.empty()) return true;
  const auto contains = [&](const std::string& value) { return lower(value).find(text_) != std::string::npos; };
  for (const auto& [name, value] : row.figures)
    if (contains(value)) return true;
  for (const auto& [name, value] : row.params)
    if (contains(value)) return true;
  return false;
}

}  // namespace commtune
