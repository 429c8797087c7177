#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "core/engine/ddp/flat_parameters.h"

namespace {

commtune::NamedTensors make_parameters() {
  return {{"a", at::arange(6, at::kFloat).view({2, 3}).set_requires_grad(true)},
          {"b", at::arange(6, 10, at::kFloat).set_requires_grad(true)},
          {"c", at::full({1}, 42.0f).set_requires_grad(true)}};
}

TEST(FlatParameters, ParametersBecomeViewsOfOneBuffer) {
  auto params = make_parameters();
  commtune::FlatParameters flat(params);
  EXPECT_EQ(flat.total_numel(), 11);
  EXPECT_TRUE(at::equal(flat.values(), at::cat({at::arange(10, at::kFloat), at::full({1}, 42.0f)})));
  // Writing through the flat buffer changes the model's parameters.
  flat.values().narrow(0, 6, 1).fill_(-1);
  EXPECT_EQ(params[1].second[0].item<float>(), -1.0f);
  EXPECT_EQ(params[0].second.sizes(), (c10::IntArrayRef{2, 3}));
  EXPECT_TRUE(params[0].second.requires_grad());
}

TEST(FlatParameters, RelayoutMovesValuesGradientsAndState) {
  auto params = make_parameters();
  commtune::FlatParameters flat(params);
  flat.grads().copy_(at::arange(11, at::kFloat).neg());
  flat.state("momentum").copy_(at::arange(11, at::kFloat).mul(10));
  const auto before_values = flat.unflatten(flat.values());
  const auto before_grads = flat.unflatten(flat.grads());
  const auto before_state = flat.unflatten(flat.state("momentum"));

  flat.relayout({2, 0, 1});
  EXPECT_EQ(flat.offset(2), 0);
  EXPECT_EQ(flat.offset(0), 1);
  EXPECT_EQ(flat.offset(1), 7);
  EXPECT_EQ(flat.values()[0].item<float>(), 42.0f);
  const auto after_values = flat.unflatten(flat.values());
  const auto after_grads = flat.unflatten(flat.grads());
  const auto after_state = flat.unflatten(flat.state("momentum"));
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(after_values[i].first, before_values[i].first);
    EXPECT_TRUE(at::equal(after_values[i].second, before_values[i].second)) << before_values[i].first;
    EXPECT_TRUE(at::equal(after_grads[i].second, before_grads[i].second)) << before_grads[i].first;
    EXPECT_TRUE(at::equal(after_state[i].second, before_state[i].second)) << before_state[i].first;
    // Parameters still alias the (new) flat buffer.
    EXPECT_EQ(params[i].second.data_ptr<float>(), flat.values().data_ptr<float>() + flat.offset(i));
  }
}

TEST(FlatParameters, RefusesWhatItCannotFlatten) {
  EXPECT_THROW(commtune::FlatParameters({}), std::invalid_argument);
  EXPECT_THROW(commtune::FlatParameters({{"h", at::zeros({2}, at::kDouble).set_requires_grad(true)}}),
               std::invalid_argument);
  commtune::FlatParameters flat(make_parameters());
  EXPECT_THROW(flat.relayout({0, 0, 1}), std::invalid_argument);
  EXPECT_THROW(flat.relayout({0, 1}), std::invalid_argument);
}

}  // namespace
