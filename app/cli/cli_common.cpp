#include "app/cli/cli_common.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <stdexcept>
#include <utility>

#include "core/tuner/config/run_config.h"
#include "core/tuner/io/output_file.h"
#include "core/tuner/launch/script_job.h"
#include "core/tuner/store/run_label.h"
#include "db/parallel.h"

namespace commtune::cli {

std::atomic<bool> g_stop{false};

namespace {
std::atomic<bool> g_stop_claimed{false};
std::atomic<int> g_stop_signal{0};

void on_stop_signal(int sig) {
  g_stop_signal.store(sig);
  g_stop.store(true);
  if (!g_stop_claimed.load()) {  // nothing started yet that needs stopping
    remove_unfinished_output_files();  // a half-written export leaves no trace, its destination as it was
    ::_exit(128 + sig);
  }
}
}  // namespace

void install_stop_signals() {
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction before {};
    ::sigaction(sig, nullptr, &before);
    if (sig == SIGHUP && before.sa_handler == SIG_IGN) continue;  // nohup
    ::sigaction(sig, &action, nullptr);
  }
}

void watch_stop_signals() { g_stop_claimed.store(true); }

int cancelled_exit_code() {
  const int sig = g_stop_signal.load();
  return 128 + (sig ? sig : SIGINT);
}

std::string store_path(const std::string& path) {
  const auto file = path.empty() ? db::default_store_path() : path;
  if (const auto problem = store_file_problem(file); !problem.empty()) throw std::invalid_argument(problem);
  return file;
}

std::string store_file_problem(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (path.empty()) return "the run store wants a file path, got ''";
  if (fs::is_directory(path, ec)) return path + " is a folder: the run store is a file (e.g. " + path + "/runs.db)";
  if (fs::exists(path, ec) && !fs::is_regular_file(path, ec))
    return path + " is not a regular file (a device or a pipe): the run store is an SQLite file";
  return "";
}

std::string output_file_problem(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (path.empty()) return "wants a file path, got ''";
  if (fs::is_directory(path, ec)) return path + " is a folder, not a file";
  if (is_output_stream(path)) return "";  // /dev/null, /dev/stdout, a pipe: written to, not replaced
  const auto parent = fs::absolute(path, ec).parent_path();
  if (!fs::is_directory(parent, ec)) return "cannot write " + path + ": the folder " + parent.string() + " does not exist";
  if (::access(parent.c_str(), W_OK) != 0) return "cannot write " + path + ": the folder " + parent.string() + " is not writable";
  return "";
}

std::unique_ptr<db::Store> open_store(const std::string& path) {
  const auto file = store_path(path);
  try {
    return std::make_unique<db::Store>(file);
  } catch (const db::Error& e) {
    if (e.code() != 8 /* SQLITE_READONLY */ && e.code() != 14 /* SQLITE_CANTOPEN */) throw;
    return std::make_unique<db::Store>(file, db::Store::Access::ReadOnly);
  }
}

std::unique_ptr<db::Writer> open_writer(const std::string& path, const db::WriterOptions& options) {
  return std::make_unique<db::Writer>(store_path(path), options);
}

namespace {

// The code point of the UTF-8 sequence starting at text[at] and its length in
// bytes; length 0 when the bytes there are not UTF-8 (overlong forms and
// surrogates included).
std::pair<char32_t, std::size_t> decode_utf8(std::string_view text, std::size_t at) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[at + i]); };
  const auto lead = byte(0);
  std::size_t length = 0;
  char32_t c = 0, least = 0;
  if (lead < 0x80) return {lead, 1};
  if (lead >= 0xc2 && lead <= 0xdf) length = 2, c = lead & 0x1f, least = 0x80;
  else if (lead >= 0xe0 && lead <= 0xef) length = 3, c = lead & 0x0f, least = 0x800;
  else if (lead >= 0xf0 && lead <= 0xf4) length = 4, c = lead & 0x07, least = 0x10000;
  else return {0, 0};
  if (at + length > text.size()) return {0, 0};
  for (std::size_t i = 1; i < length; ++i) {
    if ((byte(i) & 0xc0) != 0x80) return {0, 0};
    c = (c << 6) | (byte(i) & 0x3f);
  }
  if (c < least || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) return {0, 0};
  return {c, length};
}

// Characters a terminal acts on or draws misleadingly (text reordered by an
// override it never shows): C1 controls, the bidirectional marks, embeddings,
// overrides and isolates, line and paragraph separators, the byte order mark.
bool steers_the_terminal(char32_t c) {
  return (c >= 0x80 && c <= 0x9f) || c == 0x061c || c == 0x200e || c == 0x200f || (c >= 0x2028 && c <= 0x202e) ||
         (c >= 0x2066 && c <= 0x2069) || c == 0xfeff;
}

}  // namespace

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  char escape[16];
  for (std::size_t at = 0; at < text.size();) {
    const auto [c, length] = decode_utf8(text, at);
    if (length == 0) {
      std::snprintf(escape, sizeof escape, "\\x%02x", static_cast<unsigned char>(text[at]));
      out += escape;
      ++at;
      continue;
    }
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7f) {
      std::snprintf(escape, sizeof escape, "\\x%02x", static_cast<unsigned>(c));
      out += escape;
    } else if (steers_the_terminal(c)) {
      std::snprintf(escape, sizeof escape, "\\u%04x", static_cast<unsigned>(c));
      out += escape;
    } else {
      out.append(text.substr(at, length));
    }
    at += length;
  }
  return out;
}

namespace {

// Characters (code points) in printable UTF-8 text, which is what a column is as wide as.
std::size_t characters(std::string_view text) {
  return static_cast<std::size_t>(
      std::count_if(text.begin(), text.end(), [](char ch) { return (static_cast<unsigned char>(ch) & 0xc0) != 0x80; }));
}

// The first `count` characters of printable UTF-8 text.
std::string first_characters(const std::string& text, std::size_t count) {
  std::size_t at = 0;
  for (std::size_t seen = 0; at < text.size(); ++at)
    if ((static_cast<unsigned char>(text[at]) & 0xc0) != 0x80 && seen++ == count) break;
  return text.substr(0, at);
}

}  // namespace

void Table::add(std::vector<std::string> row) {
  for (std::size_t c = 0; c < row.size(); ++c) {
    auto& cell = row[c];
    cell = printable(cell);
    const bool last = c + 1 >= headers_.size();
    if (!last && characters(cell) > kMaxCellChars) cell = first_characters(cell, kMaxCellChars - 3) + "...";
  }
  rows_.push_back(std::move(row));
}

void Table::print(std::ostream& out) const {
  std::vector<std::size_t> width(headers_.size(), 0);
  std::vector<bool> numeric(headers_.size(), true);
  auto is_number = [](const std::string& s) {
    return (!s.empty() &&
            (std::isdigit(static_cast<unsigned char>(s[0])) || ((s[0] == '-' || s[0] == '+') && s.size() > 1))) ||
           s == "nan" || s == "inf";
  };
  for (std::size_t c = 0; c < headers_.size(); ++c) width[c] = headers_[c].size();
  for (const auto& row : rows_)
    for (std::size_t c = 0; c < row.size() && c < width.size(); ++c) {
      width[c] = std::max(width[c], characters(row[c]));
      if (row[c] != "-" && !is_number(row[c])) numeric[c] = false;
    }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string text;
    for (std::size_t c = 0; c < width.size(); ++c) {
      const std::string cell = c < cells.size() ? cells[c] : "";
      const std::string pad(width[c] - characters(cell), ' ');
      if (c) text += "  ";
      text += numeric[c] ? pad + cell : (c + 1 == width.size() ? cell : cell + pad);
    }
    out << text << "\n";
  };
  line(headers_);
  for (const auto& row : rows_) line(row);
}

CLI::Validator number_between(double low, double high, bool above) {
  const auto wanted = std::string("a number ") + (above ? "above " : "from ") + format("%g", low) + " to " +
                      format("%g", high);
  return CLI::Validator(
      [=](std::string& text) {
        try {
          std::size_t used = 0;
          const double v = std::stod(text, &used);
          if (used == text.size() && std::isfinite(v) && (above ? v > low : v >= low) && v <= high) return std::string();
        } catch (const std::logic_error&) {
        }
        return "wants " + wanted + ", got '" + text + "'";
      },
      wanted);
}

std::string json_text(const nlohmann::json& value, int indent) {
  return value.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

namespace {

// JSON text written with indent 2 as it reads one level deeper: every line after its first padded.
std::string nested(const std::string& text, const std::string& pad) {
  std::string out;
  out.reserve(text.size() + text.size() / 8);
  for (std::size_t from = 0; from < text.size();) {  // a string's newlines are escaped: these are the layout's
    const auto line_end = std::min(text.find('\n', from), text.size() - 1) + 1;
    out.append(text, from, line_end - from);
    if (text[line_end - 1] == '\n') out += pad;
    from = line_end;
  }
  return out;
}

}  // namespace

void write_json_array(std::ostream& out, std::size_t count, const std::function<nlohmann::json(std::size_t)>& element,
                      int depth) {
  if (count == 0) {
    out << "[]";
    return;
  }
  const std::string pad(static_cast<std::size_t>(2 * (depth + 1)), ' ');
  // Rows are formatted on every core a block at a time (10^5 of them are
  // seconds of work on one) and written in order.
  constexpr std::size_t kBlock = 4096;
  std::vector<std::string> texts;
  out << "[\n";
  for (std::size_t first = 0; first < count; first += kBlock) {
    texts.assign(std::min(kBlock, count - first), std::string());
    db::parallel_for(texts.size(), [&](std::size_t i) { texts[i] = nested(json_text(element(first + i), 2), pad); });
    for (std::size_t i = 0; i < texts.size(); ++i) out << pad << texts[i] << (first + i + 1 < count ? ",\n" : "\n");
  }
  out << pad.substr(2) << "]";
}

void write_json_object_and_array(std::ostream& out, const nlohmann::json& head, const std::string& key,
                                 std::size_t count, const std::function<nlohmann::json(std::size_t)>& element) {
  if (head.contains(key)) throw std::logic_error("write_json_object_and_array: '" + key + "' is in the head already");
  bool first = true, written = false;
  const auto member = [&](const std::string& name) {
    out << (first ? "\n  " : ",\n  ") << json_text(name) << ": ";
    first = false;
  };
  const auto array = [&] {
    member(key);
    write_json_array(out, count, element, 1);
    written = true;
  };
  out << "{";
  for (const auto& [name, value] : head.items()) {  // in key order, as json_text writes an object
    if (!written && name > key) array();
    member(name);
    out << nested(json_text(value, 2), "  ");
  }
  if (!written) array();
  out << "\n}";
}

std::string format(const char* printf_format, double value) {
  char text[64];
  std::snprintf(text, sizeof text, printf_format, value);
  return text;
}

std::string format_optional(const char* printf_format, const std::optional<double>& value, const char* missing) {
  if (!value) return missing;
  return std::isfinite(*value) ? format(printf_format, *value) : nonfinite_name(*value);
}

int exit_code_for(const RunOutcome& outcome) {
  switch (outcome.status) {
    case RunStatus::Succeeded:
      return kExitOk;
    case RunStatus::Cancelled:
      return cancelled_exit_code();
    case RunStatus::Diverged:
      return kExitDiverged;
    case RunStatus::Failed:
      return kExitFailed;
  }
  return kExitFailed;
}

std::string format_time(double unix_seconds) {
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm local{};
  localtime_r(&t, &local);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M", &local);
  return text;
}

std::vector<std::int64_t> select_runs(const db::Store& store, const std::vector<std::int64_t>& run_ids,
                                      std::optional<std::int64_t> sweep_id) {
  if (!run_ids.empty()) {
    for (const auto id : run_ids)
      if (!store.run(id)) throw db::Error("there is no run " + std::to_string(id) + " in " + store.path());
    return run_ids;
  }
  db::RunFilter filter;
  filter.sweep_id = sweep_id;
  if (sweep_id && !store.sweep(*sweep_id))
    throw db::Error("there is no sweep " + std::to_string(*sweep_id) + " in " + store.path());
  return store.run_ids(filter);
}

nlohmann::json optional_json(const std::optional<std::int64_t>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}
nlohmann::json optional_json(const std::optional<double>& v) { return figure_json(v); }

nlohmann::json run_json(const db::RunRecord& r, bool full) {
  nlohmann::json j{{"id", r.id},
                   {"sweep_id", optional_json(r.sweep_id)},
                   {"trial", optional_json(r.trial_number())},
                   {"name", r.name},
                   {"status", r.status},
                   {"reason", r.reason},
                   {"hook", describe_hook(r)},
                   {"host", r.host},
                   {"world_size", r.world_size},
                   {"steps_requested", r.steps_requested},
                   {"steps_completed", r.steps_completed},
                   {"fingerprint", r.fingerprint},
                   {"created_at", r.created_at},
                   {"started_at", optional_json(r.started_at)},
                   {"finished_at", optional_json(r.finished_at)},
                   {"wall_s", r.wall_s},
                   {"final_loss", optional_json(r.final_loss)}};
  if (!r.config_problem.empty()) j["config_problem"] = r.config_problem;
  if (full) {
    j["config"] = r.config;
    j["summary"] = r.summary;
  }
  return j;
}

nlohmann::json sweep_json(const db::Store& store, const db::SweepRecord& s) {
  db::RunFilter filter;
  filter.sweep_id = s.id;
  auto trials = nlohmann::json::array();
  for (const auto& r : store.runs(filter))
    trials.push_back({{"trial", optional_json(r.trial_number())},
                      {"run_id", r.id},
                      {"name", r.name},
                      {"status", r.status},
                      {"steps_completed", r.steps_completed},
                      {"final_loss", optional_json(r.final_loss)}});
  return {{"id", s.id},
          {"name", s.name},
          {"status", s.status},
          {"spec", s.spec},
          {"created_at", s.created_at},
          {"finished_at", optional_json(s.finished_at)},
          {"trials", trials}};
}

std::optional<double> summary_number(const nlohmann::json& summary, const char* pointer) {
  if (!summary.is_object()) return std::nullopt;
  const nlohmann::json::json_pointer p(pointer);
  if (!summary.contains(p)) return std::nullopt;
  return figure_from_json(summary.at(p));
}

void add_script_options(CLI::App& command, ScriptArgs& args) {
  command.add_option("--script", args.path,
                     "the job is this Python training script (docs/scripts.md), under torchrun, instead of the engine")
      ->check(CLI::ExistingFile);
  command.add_option("--python", args.python, "the script's Python, whose torch it trains with (default python3)");
  command.add_option("--nproc-per-node", args.nproc_per_node, "the script's ranks (torchrun's; sets world_size)")
      ->check(number_between(1, 4096));
  command.add_option("--steps-arg", args.steps_arg,
                     "the script's option that takes the number of steps (the run's steps are passed as --NAME N)");
  command.add_option("script_args", args.argv, "after --: the script's own arguments, as given");
}

void apply_script_args(nlohmann::json& raw, const ScriptArgs& args) {
  if (args.path.empty()) {
    const char* alone = !args.python.empty()        ? "--python"
                        : args.nproc_per_node       ? "--nproc-per-node"
                        : !args.steps_arg.empty()   ? "--steps-arg"
                        : !args.argv.empty()        ? "arguments after --"
                                                    : nullptr;
    if (alone) throw ConfigError(alone, "belongs to a script run: name the script with --script FILE");
    return;
  }
  set_param(raw, "script.path", std::filesystem::absolute(args.path).lexically_normal().string());
  if (!args.python.empty()) {  // a path, as the store then keeps it: a resumed sweep runs from any folder
    ScriptOptions named;
    named.python = args.python;
    set_param(raw, "script.python", with_absolute_paths(named).python);
  }
  if (!args.steps_arg.empty()) set_param(raw, "script.steps_arg", args.steps_arg);
  if (args.nproc_per_node) set_param(raw, "world_size", *args.nproc_per_node);
  if (!args.argv.empty()) raw["script"]["argv"] = args.argv;
}

}  // namespace commtune::cli
