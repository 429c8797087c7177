#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <filesystem>

#include "core/engine/models/weights_file.h"
#include "core/tuner/schema/param_schema.h"
#include "tests/support/python_oracle.h"

namespace {

TEST(WeightsFile, RoundTripsAndLoadsInPyTorchWithWeightsOnly) {
  const auto path = std::filesystem::temp_directory_path() / ("commtune-weights-" + std::to_string(::getpid()) + ".pt");
  const commtune::NamedTensors tensors = {{"layer.weight", at::arange(6, at::kFloat).view({2, 3})},
                                          {"layer.bias", at::tensor({0.5f, -1.5f})}};
  commtune::save_weights(path.string(), tensors);
  const auto back = commtune::read_weights(path.string());
  ASSERT_EQ(back.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(back[i].first, tensors[i].first);
    EXPECT_TRUE(at::equal(back[i].second, tensors[i].second));
  }
  const auto loaded = commtune::testing::run_python(
      "import json, torch\n"
      "d = torch.load('" +
      path.string() +
      "', weights_only=True)\n"
      "print(json.dumps({k: v.tolist() for k, v in d.items()}))\n");
  EXPECT_EQ(loaded["layer.bias"], nlohmann::json({0.5, -1.5}));
  EXPECT_EQ(loaded["layer.weight"][1], nlohmann::json({3.0, 4.0, 5.0}));
  std::filesystem::remove(path);
}

TEST(WeightsFile, LoadingChecksNamesAndShapes) {
  auto p = at::zeros({2, 3});
  const commtune::NamedTensors params = {{"w", p}};
  commtune::load_weights_into(params, {{"w", at::ones({2, 3})}, {"extra", at::ones({1})}}, "f.pt", "weights.init");
  EXPECT_EQ(p.sum().item<float>(), 6.0f);
  try {
    commtune::load_weights_into(params, {{"w", at::ones({3, 2})}}, "f.pt", "weights.init");
    FAIL();
  } catch (const commtune::ConfigError& e) {
    EXPECT_EQ(e.field(), "weights.init");
    EXPECT_NE(std::string(e.what()).find("[3, 2]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(commtune::load_weights_into(params, {{"v", at::ones({2, 3})}}, "f.pt", "weights.init"),
               commtune::ConfigError);
  EXPECT_THROW(commtune::read_weights("/nonexistent/weights.pt"), std::runtime_error);
}

}  // namespace
