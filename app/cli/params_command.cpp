// `params`: every configurable parameter, from the one schema, as text,
// JSON or the Markdown of docs/config.md.
#include <iostream>

#include "app/cli/commands.h"
#include "core/tuner/config/run_config.h"

namespace commtune::cli {
namespace {

void print_param(const nlohmann::json& p, const std::string& prefix) {
  std::cout << "  " << prefix << p["name"].get<std::string>() << " (" << p["type"].get<std::string>() << ", default "
            << p["default"].dump() << "): " << p["doc"].get<std::string>() << " [" << p["allowed"].get<std::string>()
            << (p.contains("unit") ? ", " + p["unit"].get<std::string>() : "") << "]\n";
}

void print_markdown_param(const nlohmann::json& p, const std::string& prefix) {
  std::cout << "| `" << prefix << p["name"].get<std::string>() << "` | " << p["type"].get<std::string>() << " | `"
            << p["default"].dump() << "` | " << p["allowed"].get<std::string>()
            << (p.contains("unit") ? " (" + p["unit"].get<std::string>() + ")" : "") << " | "
            << p["doc"].get<std::string>() << " |\n";
}

int params_command(const std::string& only, bool as_json, bool as_markdown) {
  const auto schema = describe_schema();
  if (as_json) {
    std::cout << schema.dump(2) << "\n";
    return 0;
  }
  if (!only.empty() && only != "run") {
    std::string known = "run";
    bool found = false;
    for (const auto& section : schema["sections"]) {
      known += ", " + section["section"].get<std::string>();
      found = found || section["section"] == only;
    }
    if (!found) throw std::invalid_argument("params: no section '" + only + "'; the sections are " + known);
  }
  auto show = as_markdown ? print_markdown_param : print_param;
  const char* header = "| parameter | type | default | allowed | meaning |\n|---|---|---|---|---|\n";
  if (only.empty() || only == "run") {
    std::cout << (as_markdown ? "## Run (top level)\n\n" : "run (top level):\n") << (as_markdown ? header : "");
    for (const auto& p : schema["root"]) show(p, "");
    std::cout << "\n";
  }
  for (const auto& section : schema["sections"]) {
    const auto key = section["section"].get<std::string>();
    if (!only.empty() && only != key) continue;
    if (section.contains("entries")) {
      std::cout << (as_markdown ? "## " + key + "\n\n" : key + ":\n");
      std::cout << (as_markdown
                        ? "`" + key + ".name` selects one of the entries below (default `" +
                              section["default"].get<std::string>() + "`).\n\n"
                        : "  " + key + ".name: one of the entries below (default " + section["default"].dump() + ")\n");
      if (!section["common"].empty()) {
        std::cout << (as_markdown ? "Common to every " + key + ":\n\n" + header : "");
        for (const auto& p : section["common"]) show(p, key + ".");
        std::cout << (as_markdown ? "\n" : "");
      }
      for (const auto& e : section["entries"]) {
        std::cout << (as_markdown ? "### " + key + ".name = `" + e["name"].get<std::string>() + "`\n\n" +
                                        e["doc"].get<std::string>() + "\n\n"
                                  : "  [" + e["name"].get<std::string>() + "] " + e["doc"].get<std::string>() + "\n");
        if (as_markdown && !e["params"].empty()) std::cout << header;
        for (const auto& p : e["params"]) show(p, (as_markdown ? "" : "  ") + key + ".");
        if (as_markdown) std::cout << "\n";
      }
    } else {
      std::cout << (as_markdown ? "## " + key + "\n\n" + header : key + ":\n");
      for (const auto& p : section["params"]) show(p, key + ".");
    }
    std::cout << "\n";
  }
  return 0;
}

}  // namespace

void add_params_command(CLI::App& app, Context& context) {
  struct Args {
    std::string section;
    bool as_json = false, as_markdown = false;
  };
  auto args = std::make_shared<Args>();
  auto* params = app.add_subcommand("params", "list every parameter: type, default, allowed values, meaning");
  params->add_option("section", args->section,
                     "only this section (run, model, data, optimizer, hook, ddp, weights, checkpoint, network, debug)");
  params->add_flag("--json", args->as_json, "machine-readable");
  params->add_flag("--markdown", args->as_markdown, "as Markdown tables (docs/config.md)");
  params->callback(
      [args, &context] { context.exit_code = params_command(args->section, args->as_json, args->as_markdown); });
}

}  // namespace commtune::cli
