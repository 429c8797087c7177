// The run filter language that `commtune-cli list --search` and the Runs
// page share: comma-separated conditions NAME OP VALUE (OP one of = != < <=
// > >=) and free text, e.g. `hook.matrix_approximation_rank = 2, tail_loss < 2.1,
// tag = best powersgd`. NAME is a figure of the run (id, name, sweep,
// status, hook, tag, ranks, steps, loss, ms, mb, ratio, wall) or a
// parameter (optimizer.lr); numbers compare as numbers, `=` at the
// precision the value is written with (lr = 0.05 holds for
// 0.05000000000000001), nan and inf as words (loss = nan). Free text matches
// the figures' and the parameters' values, never parameter names: `randomk`
// finds randomk runs, not every BytePS run that has a randomk setting.
#pragma once

#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/tuner/store/run_metrics.h"

namespace commtune {

// A condition or name the language does not know, said in one line.
struct QueryError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// A run as a query reads it: its figures and every parameter, as text.
struct QueryRow {
  std::map<std::string, std::string> figures;  // by the names query_figures() lists
  std::map<std::string, std::string> params;   // hook.matrix_approximation_rank -> "2"
};

// The figure names conditions use, in the order tables show them.
const std::vector<std::string>& query_figures();

// Every parameter of a run, by name, as its checked configuration holds
// it (hook.matrix_approximation_rank -> 2, data.shuffle -> true, defaults
// the stored text lacks included): the leaves outside arrays, an array
// whole as its JSON text, as the store's run_params table (what --param
// filters read) keeps the stored text's. Sorted by name; none for a run
// whose configuration cannot be read (its config_problem says why).
std::vector<std::pair<std::string, nlohmann::json>> run_params(const db::RunRecord& run);
// One of them; null when the run has no such parameter.
nlohmann::json run_param(const db::RunRecord& run, const std::string& name);

// The parameter texts read as a configuration holds them (true/false, 1e-05).
QueryRow query_row(const db::RunRecord& run, const std::string& hook_label, const RunDigest& digest);

// A value as a table and a query show it: "1e-05", "true", a string unquoted.
std::string param_value_text(const nlohmann::json& value);

// Whether `name` is a parameter of some entry of the schema (loaded plugins included).
bool is_parameter_name(const std::string& name);

// A parameter's or figure's text read as a finite number; nullopt for
// words, nan and inf (the query, the Analysis page's axes and figures).
std::optional<double> finite_number(const std::string& text);

class RunQuery {
 public:
  struct Condition {
    std::string name;  // a figure (lower case) or a parameter
    bool is_figure = false;
    std::string op;  // = != < <= > >=
    std::string value;
  };

  // Throws QueryError naming the condition: a name that is neither a figure,
  // nor in `known_params`, nor a parameter of the schema; a missing value.
  static RunQuery parse(const std::string& input, const std::vector<std::string>& known_params = {});

  bool matches(const QueryRow& row) const;
  bool empty() const { return conditions_.empty() && text_.empty(); }
  const std::vector<Condition>& conditions() const { return conditions_; }
  const std::string& text() const { return text_; }

 private:
  std::vector<Condition> conditions_;
  std::string text_;  // free text, lower case
};

}  // namespace commtune
