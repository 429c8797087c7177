// What only the engine can check about a configuration: what a component
// checks in code (PowerSGD's error feedback wants start_powerSGD_iter > 1,
// how a hierarchy's groups fit, a plugin's own rules), and whether a hook
// compresses anything of the model it builds for its data (the shapes of its
// parameters, core/engine/hooks/hook_size.h). Everything asked is answered by one worker start
// (`commtune-worker --check`), or in this process where the engine is linked
// in; a configuration whose components check nothing in code asks nothing.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/tuner/config/run_config.h"

namespace commtune {

class EngineCheck {
 public:
  // The sections of `config` whose component checks anything in code;
  // `label` names it in a refusal (the first configuration with a section).
  void add_config(const RunConfig& config, const std::string& label = "");
  // Whether the hook of `config` sends anything compressed for its model:
  // the ticket to ask hook_size_problem() with.
  std::size_t add_hook_size(const RunConfig& config);

  struct Refusal {
    ConfigError error;
    std::string label;
  };
  // Asks the engine about everything added, once. The first refusal, if
  // any. Throws std::runtime_error when the engine cannot be asked.
  std::optional<Refusal> ask();
  // Why the hook would send every bucket uncompressed (its field and the
  // reason); none when it compresses some, or when the model or its data
  // cannot be built here (a file only the nodes have).
  const std::optional<ConfigError>& hook_size_problem(std::size_t ticket) const { return size_problems_.at(ticket); }

 private:
  std::map<std::string, std::size_t> known_;  // a request's dump -> its place
  nlohmann::json sections_ = nlohmann::json::array(), models_ = nlohmann::json::array();
  std::vector<std::string> labels_;                        // by section
  std::vector<std::size_t> model_of_ticket_;              // ticket -> model
  std::vector<std::optional<ConfigError>> size_problems_;  // by ticket, once asked
};

// Throws the engine's refusal of one configuration to run, as ConfigError.
void check_in_the_engine(const RunConfig& config);

// The worker's side of the exchange: {"sections": [{"section", "value"}],
// "models": [configuration]} answered with {"sections": [null or {"field",
// "problem"}], "models": [null or {"field", "problem"}]}.
inline constexpr const char* kEngineCheckSections = "sections";
inline constexpr const char* kEngineCheckModels = "models";

}  // namespace commtune
