#include <gtest/gtest.h>

#include "core/tuner/config/command_line.h"
#include "core/tuner/config/run_config.h"

using commtune::ConfigError;
using commtune::RunConfig;
using nlohmann::json;

namespace {

// The message of the ConfigError `fn` throws, and its field.
template <class Fn>
std::pair<std::string, std::string> config_error(Fn fn) {
  try {
    fn();
  } catch (const ConfigError& e) {
    return {e.field(), e.what()};
  }
  ADD_FAILURE() << "no ConfigError thrown";
  return {};
}

TEST(Schema, EmptyConfigTakesEveryDefault) {
  const auto c = RunConfig::parse(json::object());
  EXPECT_EQ(c.run.steps, 200);
  EXPECT_EQ(c.run.device, "auto");
  EXPECT_DOUBLE_EQ(c.run.timeout_s, 30.0);
  EXPECT_EQ(c.model["name"], "mlp");
  EXPECT_EQ(c.model["hidden"], 1024);
  EXPECT_EQ(c.data["batch_size"], 32);
  EXPECT_EQ(c.optimizer["momentum"], 0.9);
  EXPECT_EQ(c.hook["wrapper"], "none");
  EXPECT_DOUBLE_EQ(c.ddp.bucket_cap_mb, 25.0);
  EXPECT_DOUBLE_EQ(c.ddp.first_bucket_cap_mb, 1.0);
  // Normalisation is idempotent: a written config parses to itself.
  EXPECT_EQ(RunConfig::parse(c.to_json()).to_json(), c.to_json());
}

TEST(Schema, TheFirstBucketIsCappedAsPyTorch2sDdpCapsIt) {
  // DDP(bucket_cap_mb=X) in PyTorch 2.x caps every bucket at X; its own 1 MiB
  // first bucket only under the default 25 MiB. A cap given is kept.
  const auto first_cap = [](const json& ddp) { return RunConfig::parse({{"ddp", ddp}}).ddp.first_bucket_cap_mb; };
  EXPECT_DOUBLE_EQ(first_cap({{"bucket_cap_mb", 5}}), 5.0);
  EXPECT_DOUBLE_EQ(first_cap({{"bucket_cap_mb", 25}}), 1.0);
  EXPECT_DOUBLE_EQ(first_cap({{"bucket_cap_mb", 5}, {"first_bucket_cap_mb", 0.5}}), 0.5);
  EXPECT_DOUBLE_EQ(first_cap({{"first_bucket_cap_mb", 0}}), 1.0);
}

TEST(Schema, OutOfRangeNamesTheFieldAndTheRange) {
  auto [field, message] = config_error([] { RunConfig::parse({{"optimizer", {{"lr", -1}}}}); });
  EXPECT_EQ(field, "optimizer.lr");
  EXPECT_NE(message.find("out of range"), std::string::npos) << message;
  EXPECT_NE(message.find("(0, 10]"), std::string::npos) << message;

  std::tie(field, message) = config_error([] { RunConfig::parse({{"steps", 0}}); });
  EXPECT_EQ(field, "steps");
  EXPECT_NE(message.find("an integer from 1 to 1099511627776"), std::string::npos) << message;
}

TEST(Schema, WrongTypesAreRejected) {
  EXPECT_EQ(config_error([] { RunConfig::parse({{"steps", 2.5}}); }).first, "steps");
  EXPECT_EQ(config_error([] { RunConfig::parse({{"steps", "10"}}); }).first, "steps");
  EXPECT_EQ(config_error([] { RunConfig::parse({{"data", {{"shuffle", 1}}}}); }).first, "data.shuffle");
  EXPECT_EQ(config_error([] { RunConfig::parse({{"model", 3}}); }).first, "model");
  // An integral float is an integer.
  EXPECT_EQ(RunConfig::parse({{"steps", 12.0}}).run.steps, 12);
}

TEST(Schema, UnknownKeysGetASuggestion) {
  auto [field, message] = config_error([] { RunConfig::parse({{"model", {{"hiden", 3}}}}); });
  EXPECT_EQ(field, "model.hiden");
  EXPECT_NE(message.find("did you mean 'hidden'"), std::string::npos) << message;

  std::tie(field, message) = config_error([] { RunConfig::parse({{"stepz", 3}}); });
  EXPECT_EQ(field, "stepz");
  EXPECT_NE(message.find("'steps'"), std::string::npos) << message;
}

TEST(Schema, ComponentNamesAreChoices) {
  auto [field, message] = config_error([] { RunConfig::parse({{"hook", {{"name", "fp16compress"}}}}); });
  EXPECT_EQ(field, "hook.name");
  EXPECT_NE(message.find("did you mean 'fp16_compress'"), std::string::npos) << message;
  EXPECT_NE(message.find("allreduce"), std::string::npos) << message;
}

TEST(Schema, EntryParametersDependOnTheChosenEntry) {
  // momentum belongs to sgd, not adam.
  EXPECT_EQ(config_error([] {
              RunConfig::parse({{"optimizer", {{"name", "adam"}, {"momentum", 0.5}}}});
            }).first,
            "optimizer.momentum");
  const auto c = RunConfig::parse({{"optimizer", {{"name", "adam"}, {"beta2", 0.99}}}});
  EXPECT_EQ(c.optimizer["beta2"], 0.99);
  EXPECT_EQ(c.optimizer["lr"], 0.05);  // common to every optimizer
}

TEST(Schema, OverridesParseTextAsTheParameterType) {
  json raw = json::object();
  commtune::apply_override(raw, "steps=17");
  commtune::apply_override(raw, "data.shuffle=off");
  commtune::apply_override(raw, "hook.name=fp16_compress");
  commtune::apply_override(raw, "optimizer.name=adam");
  commtune::apply_override(raw, "optimizer.eps=1e-6");
  commtune::apply_override(raw, "weights.init=123");  // a path that looks like a number stays a string
  const auto c = RunConfig::parse(raw);
  EXPECT_EQ(c.run.steps, 17);
  EXPECT_EQ(c.data["shuffle"], false);
  EXPECT_EQ(c.hook["name"], "fp16_compress");
  EXPECT_DOUBLE_EQ(c.optimizer["eps"].get<double>(), 1e-6);
  EXPECT_EQ(c.weights.init, "123");
}

TEST(Schema, BadOverridesNameTheirPath) {
  json raw = json::object();
  EXPECT_EQ(config_error([&] { commtune::apply_override(raw, "steps=many"); }).first, "steps");
  EXPECT_EQ(config_error([&] { commtune::apply_override(raw, "model.hidden=0"); }).first, "model.hidden");
  EXPECT_EQ(config_error([&] { commtune::apply_override(raw, "model.width=3"); }).first, "model.width");
  EXPECT_EQ(config_error([&] { commtune::apply_override(raw, "nosuch.x=3"); }).first, "nosuch");
  EXPECT_EQ(config_error([&] { commtune::apply_override(raw, "ddp.bucket_cap=3"); }).first, "ddp.bucket_cap");
  config_error([&] { commtune::apply_override(raw, "steps"); });
}

TEST(Schema, DumpDirIsRequiredForGradientDumps) {
  EXPECT_EQ(config_error([] { RunConfig::parse({{"debug", {{"dump_grads_steps", 2}}}}); }).first, "debug.dump_dir");
}

TEST(Schema, AScriptsArgumentsAreScalarsPassedAsOptionsInNameOrder) {
  nlohmann::json raw = {{"script", {{"path", "/tmp/train.py"}, {"steps_arg", "steps"}, {"argv", {"--x", "y"}}}}};
  commtune::apply_override(raw, "script.args.lr=0.05");
  commtune::apply_override(raw, "script.args.opt=adam");
  commtune::apply_override(raw, "script.args.amp=true");
  commtune::apply_override(raw, "script.args.bf16=false");
  const auto config = RunConfig::parse(raw);
  EXPECT_EQ(config.script.args["lr"], 0.05);
  EXPECT_EQ(config.script.args["opt"], "adam");
  EXPECT_EQ(config.script.command_args(12), (std::vector<std::string>{"--steps", "12", "--amp", "--lr", "0.05",
                                                                       "--opt", "adam", "--x", "y"}));
  EXPECT_EQ(RunConfig::parse(config.to_json()).to_json(), config.to_json());
  EXPECT_FALSE(RunConfig::parse(nlohmann::json::object()).to_json().contains("script"));  // an engine run's is as before
}

TEST(Schema, AScriptSectionThatCannotMakeACommandLineIsRefusedNamingTheField) {
  const auto field = [](nlohmann::json script) { return config_error([&] { RunConfig::parse({{"script", script}}); }).first; };
  EXPECT_EQ(field({{"path", "t.py"}, {"args", {{"-lr", 1}}}}), "script.args.-lr");
  EXPECT_EQ(field({{"path", "t.py"}, {"args", {{"lr", {1, 2}}}}}), "script.args.lr");
  EXPECT_EQ(field({{"path", "t.py"}, {"argv", {1}}}), "script.argv.0");
  EXPECT_EQ(field({{"path", "t.py"}, {"argv", std::vector<std::string>(300, "x")}}), "script.argv");
  EXPECT_EQ(field({{"path", "t.py"}, {"argv", {std::string(5000, 'x')}}}), "script.argv.0");
  EXPECT_EQ(field({{"args", {{"lr", 1}}}}), "script.path");
  EXPECT_EQ(field({{"path", "t.py"}, {"steps_arg", "steps"}, {"args", {{"steps", 3}}}}), "script.args.steps");
  EXPECT_EQ(field({{"path", "t.py"}, {"timeout_s", 0}}), "script.timeout_s");
  EXPECT_EQ(field({{"path", "t.py"}, {"pyhton", "x"}}), "script.pyhton");
}

TEST(Schema, AScriptsPathsHoldNoControlCharacter) {
  // Launch scripts name the script and its Python in comments: a newline would end one and run the rest.
  for (const char* field : {"path", "python"})
    EXPECT_EQ(config_error([&] { commtune::ScriptOptions::parse({{field, "/opt/x\nrm -rf ~"}}); }).first,
              std::string("script.") + field);
  EXPECT_EQ(commtune::ScriptOptions::parse({{"path", "/my scripts/train.py"}, {"python", "python3"}}).python, "python3");
}

TEST(Schema, AScriptsCommandLineReadsAsAShellSplitsItAndBack) {
  using commtune::join_command_line;
  using commtune::split_command_line;
  EXPECT_EQ(split_command_line(R"(  --data '/my data/x' --name "a b"  \q\ r "x\"y\$" '' a'b'"c")", "f"),
            (std::vector<std::string>{"--data", "/my data/x", "--name", "a b", "q r", "x\"y$", "", "abc"}));
  for (const std::vector<std::string>& words : {std::vector<std::string>{"--lr", "0.05", "it's", "a b", "", "$HOME"},
                                               std::vector<std::string>{}})
    EXPECT_EQ(split_command_line(join_command_line(words), "f"), words);
  EXPECT_EQ(config_error([] { split_command_line("--name 'open", "script.argv"); }),
            (std::pair<std::string, std::string>{"script.argv", "script.argv: has a ' at character 8 that is never closed"}));
  EXPECT_EQ(config_error([] { split_command_line("x\\", "f"); }).second, "f: ends in a backslash, which escapes nothing");
  EXPECT_EQ(config_error([] { split_command_line(std::string(11, 'x'), "f", 10); }).second,
            "f: is 11 characters, over 10");

  const auto args = commtune::ScriptOptions::args_from_text("lr=0.05 opt=adam amp=true name='a b'");
  EXPECT_EQ(args, (nlohmann::json{{"lr", 0.05}, {"opt", "adam"}, {"amp", true}, {"name", "a b"}}));
  commtune::ScriptOptions script;
  script.args = args;
  EXPECT_EQ(script.args_text(), "amp=true lr=0.05 'name=a b' opt=adam");
  EXPECT_EQ(commtune::ScriptOptions::args_from_text(script.args_text()), args);
  EXPECT_EQ(config_error([] { commtune::ScriptOptions::args_from_text("lr"); }).first, "script.args");
  EXPECT_EQ(config_error([] { commtune::ScriptOptions::args_from_text("lr=1 lr=2"); }).first, "script.args.lr");
  EXPECT_EQ(config_error([] { commtune::ScriptOptions::args_from_text("-x=1"); }).first, "script.args.-x");
}

TEST(Schema, DescribeListsEverySection) {
  const auto d = commtune::describe_schema();
  std::vector<std::string> sections;
  for (const auto& s : d["sections"]) sections.push_back(s["section"]);
  EXPECT_EQ(sections,
            (std::vector<std::string>{"model", "data", "optimizer", "hook", "ddp", "weights", "checkpoint", "network", "debug",
                                      "script"}));
  for (const auto& p : d["root"]) {
    EXPECT_FALSE(p["doc"].get<std::string>().empty()) << p.dump();
    EXPECT_FALSE(p["allowed"].get<std::string>().empty()) << p.dump();
  }
}

}  // namespace
