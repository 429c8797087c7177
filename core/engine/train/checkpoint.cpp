#include "core/engine/train/checkpoint.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <cstdio>
#include <filesystem>

#include "core/engine/io/pickle_file.h"

namespace commtune {

namespace {
constexpr const char* kFormat = "commtune.checkpoint";
// Version 2: weights and optimizer state keyed by parameter name (version 1
// held them flat in bucket order, a layout a reader had to know).
constexpr std::int64_t kVersion = 2;
using Dict = c10::impl::GenericDict;
Dict string_dict() { return Dict(c10::StringType::get(), c10::AnyType::get()); }
}  // namespace

std::string checkpoint_folder(const std::string& dir, std::int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%06lld", static_cast<long long>(step));
  return (std::filesystem::path(dir) / name).string();
}

std::string checkpoint_file(const std::string& folder, int rank) {
  return (std::filesystem::path(folder) / ("rank-" + std::to_string(rank) + ".pt")).string();
}

void TrainingState::save(const std::string& folder, std::int64_t next_step, int rank, int world_size) const {
  std::filesystem::create_directories(folder);
  auto root = string_dict();
  root.insert("format", std::string(kFormat));
  root.insert("version", kVersion);
  root.insert("step", next_step);
  root.insert("rank", static_cast<std::int64_t>(rank));
  root.insert("world_size", static_cast<std::int64_t>(world_size));

  // Keyed by name, in model order: "model" is a state_dict that
  // model.load_state_dict takes; "optimizer_state" is what torch.optim keeps
  // in optimizer.state[parameter]. Only the reducer's bucket layout is
  // positional: its indices refer to "parameter_names".
  c10::impl::GenericList names(c10::StringType::get());
  for (std::size_t i = 0; i < params.count(); ++i) names.push_back(params.name(i));
  root.insert("parameter_names", names);
  auto model = string_dict();
  for (auto& [name, value] : params.unflatten(params.values().cpu())) model.insert(name, value);
  root.insert("model", model);
  std::vector<NamedTensors> states;
  std::vector<std::string> state_names;
  for (const auto& [state_name, flat] : params.states()) {
    state_names.push_back(state_name);
    states.push_back(params.unflatten(flat.cpu()));
  }
  auto optimizer_states = string_dict();
  for (std::size_t i = 0; i < params.count(); ++i) {
    auto per_parameter = string_dict();
    for (std::size_t s = 0; s < states.size(); ++s) per_parameter.insert(state_names[s], states[s][i].second);
    optimizer_states.insert(params.name(i), per_parameter);
  }
  root.insert("optimizer_state", optimizer_states);

  auto reducer_state = string_dict();
  reducer.save_state(reducer_state);
  root.insert("reducer", reducer_state);
  auto optimizer_state = string_dict();
  optimizer.save_state(optimizer_state);
  root.insert("optimizer", optimizer_state);
  auto hook_state = string_dict();
  hook.save_state(hook_state);
  root.insert("hook", hook_state);
  const auto [epoch, position] = loader.position();
  root.insert("loader_epoch", epoch);
  root.insert("loader_position", position);
  write_pickle_file(checkpoint_file(folder, rank), root);
}

Dict read_checkpoint(const std::string& folder, int rank) {
  const auto file = checkpoint_file(folder, rank);
  if (!std::filesystem::exists(file))
    throw std::runtime_error(file + " does not exist (is " + folder + " a step-NNNNNN checkpoint folder?)");
  const auto value = read_pickle_file(file);
  if (!value.isGenericDict()) throw std::runtime_error(file + " is not a commtune checkpoint");
  auto root = value.toGenericDict();
  if (!root.contains("format") || !root.at("format").isString() || root.at("format").toStringRef() != kFormat)
    throw std::runtime_error(file + " is not a commtune checkpoint");
  if (!root.contains("version") || !root.at("version").isInt())
    throw std::runtime_error(file + " has no integer 'version'");
  if (root.at("version").toInt() != kVersion)
    throw std::runtime_error(file + " has checkpoint version " + std::to_string(root.at("version").toInt()) +
                             "; this build reads " + std::to_string(kVersion));
  return root;
}

namespace {
struct MissingEntry : std::out_of_range {
  using std::out_of_range::out_of_range;
};
}  // namespace

c10::IValue checkpoint_entry(const c10::impl::GenericDict& dict, const std::string& key) {
  const auto found = dict.find(key);
  if (found == dict.end()) throw MissingEntry("'" + key + "' is missing");
  return found->value();
}

void read_checkpoint_entries(const std::string& where, const std::function<void()>& read) {
  const auto fail = [&](const std::string& what) {
    throw std::runtime_error(where + " is not a checkpoint this build can read: " + what.substr(0, what.find('\n')));
  };
  try {
    read();
  } catch (const c10::Error& e) {
    // libtorch's type checks are internal asserts ("... please report a bug
    // to PyTorch. Expected GenericDict but got Int"): keep only what was expected.
    std::string what = e.what_without_backtrace();
    what = what.substr(0, what.find('\n'));
    const auto expected = what.find("Expected ");
    const auto assertion = what.find(" INTERNAL ASSERT");
    if (expected != std::string::npos) {
      what = "an entry has the wrong type (" + what.substr(expected) + ")";
    } else if (assertion != std::string::npos) {
      auto check = what.substr(0, assertion);  // "isInt()": the type libtorch wanted
      if (check.rfind("is", 0) == 0 && check.size() > 4 && check.substr(check.size() - 2) == "()")
        check = check.substr(2, check.size() - 4);
      what = "an entry has the wrong type (expected " + check + ")";
    }
    fail(what);
  } catch (const MissingEntry& e) {
    fail(e.what());
  } catch (const std::out_of_range&) {  // c10::Dict::at's message names no key
    fail("an entry is missing");
  }
}

std::int64_t TrainingState::load(const std::string& folder, int rank, int world_size) {
  std::int64_t step = 0;
  try {
    read_checkpoint_entries(folder + " (rank " + std::to_string(rank) + ")",
                            [&] { step = load_checked(folder, rank, world_size); });
  } catch (const ConfigError&) {
    throw;
  } catch (const std::runtime_error& e) {
    throw ConfigError("checkpoint.resume", e.what());
  }
  return step;
}

std::int64_t TrainingState::load_checked(const std::string& folder, int rank, int world_size) {
  // Every rank checks the world size from rank 0's file, so all report the same mismatch.
  const auto written_by = read_checkpoint(folder, 0).at("world_size").toInt();
  if (written_by != world_size)
    throw ConfigError("checkpoint.resume", folder + " was written by " + std::to_string(written_by) +
                                               " ranks; this run has " + std::to_string(world_size));
  const auto root = read_checkpoint(folder, rank);

  const auto names = checkpoint_entry(root, "parameter_names").toList();
  const auto model = checkpoint_entry(root, "model").toGenericDict();
  const auto optimizer_states = checkpoint_entry(root, "optimizer_state").toGenericDict();
  const auto refuse = [&](const std::string& why) { throw ConfigError("checkpoint.resume", folder + ": " + why); };
  if (names.size() != params.count() || model.size() != params.count())
    refuse("it holds " + std::to_string(model.size()) + " parameters, this model has " +
           std::to_string(params.count()));
  for (std::size_t i = 0; i < params.count(); ++i) {
    const auto& name = params.name(i);
    if (!model.contains(name)) refuse("this model's parameter '" + name + "' is not in it (another model?)");
    if (names.get(i).toStringRef() != name)  // the bucket layout indexes parameters in model order
      refuse("parameter '" + name + "' is at another position there (a model that declares its parameters in "
             "another order)");
    const auto sizes = checkpoint_entry(model, name).toTensor().sizes();
    if (std::vector<std::int64_t>(sizes.begin(), sizes.end()) != params.shape(i))
      refuse("parameter '" + name + "' has shape " + c10::str(sizes) + " there, " + c10::str(params.shape(i)) +
             " in this model");
  }

  // The layout first (it moves every flat buffer), then the values into it.
  reducer.load_state(checkpoint_entry(root, "reducer").toGenericDict());
  at::NoGradGuard no_grad;
  for (std::size_t i = 0; i < params.count(); ++i) {
    const auto& name = params.name(i);
    params.values().narrow(0, params.offset(i), params.numel(i)).copy_(model.at(name).toTensor().reshape(-1));
    const auto per_parameter = checkpoint_entry(optimizer_states, name).toGenericDict();
    for (const auto& item : per_parameter) {
      const auto value = item.value().toTensor();
      if (value.numel() != params.numel(i))
        refuse("optimizer state '" + item.key().toStringRef() + "' of '" + name + "' has " +
               std::to_string(value.numel()) + " elements, the parameter " + std::to_string(params.numel(i)));
      params.state(item.key().toStringRef()).narrow(0, params.offset(i), params.numel(i)).copy_(value.reshape(-1));
    }
  }
  optimizer.load_state(root.at("optimizer").toGenericDict());
  const auto hook_state = root.at("hook").toGenericDict();
  if (!hook_state.empty()) hook.load_state(hook_state);
  loader.seek(root.at("loader_epoch").toInt(), root.at("loader_position").toInt());
  return root.at("step").toInt();
}

}  // namespace commtune
