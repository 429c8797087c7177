// The fused optimizer kernels must round exactly like the ATen op sequences
// of torch.optim (the same expressions PyTorch runs per parameter), and the
// bf16 sum like a float32 sum rounded once.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/version.h>

#include <cmath>
#include <filesystem>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/kernels.h"

namespace {

using commtune::kernels::Device;

at::Tensor random(std::int64_t n, std::uint64_t seed, double scale = 1.0) {
  auto g = at::detail::createCPUGenerator(seed);
  return at::randn({n}, g).mul_(scale);
}

void expect_bit_equal(const at::Tensor& a, const at::Tensor& b, const char* what) {
  ASSERT_EQ(a.numel(), b.numel());
  const auto differing = a.ne(b).sum().item<std::int64_t>();
  EXPECT_EQ(differing, 0) << what << ": " << differing << " of " << a.numel() << " elements differ";
}

struct SgdCase {
  double lr, momentum, dampening, weight_decay;
  bool nesterov;
};

// What torch.optim.SGD's _single_tensor_sgd does, in ATen ops.
void sgd_reference(at::Tensor& p, const at::Tensor& g, at::Tensor& buf, bool first, const SgdCase& c) {
  auto d = c.weight_decay != 0 ? g.add(p, c.weight_decay) : g;
  if (c.momentum != 0) {
    if (first)
      buf.copy_(d);
    else
      buf.mul_(c.momentum).add_(d, 1 - c.dampening);
    d = c.nesterov ? d.add(buf, c.momentum) : buf;
  }
  p.add_(d, -c.lr);
}

TEST(Kernels, SgdMatchesTorchOptimBitForBit) {
  const std::vector<SgdCase> cases = {
      {0.1, 0.9, 0, 0, false}, {0.05, 0.9, 0.1, 1e-4, false}, {0.01, 0.9, 0, 5e-4, true}, {0.3, 0, 0, 0.01, false}};
  for (std::int64_t n : {1, 15, 16, 17, 1000, 4099}) {
    for (const auto& c : cases) {
      auto p_ref = random(n, 1), p = p_ref.clone();
      auto buf_ref = at::zeros({n}), buf = at::zeros({n});
      for (int step = 0; step < 3; ++step) {
        const auto g = random(n, 10 + step, 0.5);
        sgd_reference(p_ref, g, buf_ref, step == 0, c);
        commtune::kernels::SgdStep h;
        h.lr = static_cast<float>(c.lr);
        h.momentum = static_cast<float>(c.momentum);
        h.one_minus_dampening = static_cast<float>(1.0 - c.dampening);
        h.weight_decay = static_cast<float>(c.weight_decay);
        h.nesterov = c.nesterov;
        h.first_step = step == 0;
        commtune::kernels::sgd_step(Device::Cpu, p.data_ptr<float>(), g.data_ptr<float>(), buf.data_ptr<float>(), n, h);
      }
      expect_bit_equal(p, p_ref, "sgd params");
      expect_bit_equal(buf, buf_ref, "sgd momentum");
    }
  }
}

TEST(Kernels, AdamMatchesTorchOptimBitForBit) {
  const double lr = 1e-3, beta2 = 0.999, eps = 1e-8;
  // beta1 0.3: lerp's weight 0.7 takes its other branch (from the end).
  for (const auto& [beta1, weight_decay] : {std::pair{0.9, 0.0}, std::pair{0.9, 0.01}, std::pair{0.3, 0.0}}) {
    const std::int64_t n = 4096 + 13;
    auto p_ref = random(n, 2), p = p_ref.clone();
    auto m_ref = at::zeros({n}), v_ref = at::zeros({n}), m = at::zeros({n}), v = at::zeros({n});
    for (int t = 1; t <= 5; ++t) {
      const auto g = random(n, 20 + t, 0.1);
      // torch.optim.Adam's _single_tensor_adam, as the linked libtorch has it
      const auto grad = weight_decay != 0 ? g.add(p_ref, weight_decay) : g;
      if (TORCH_VERSION_MAJOR >= 2)
        m_ref.lerp_(grad, 1 - beta1);
      else
        m_ref.mul_(beta1).add_(grad, 1 - beta1);
      v_ref.mul_(beta2).addcmul_(grad, grad, 1 - beta2);
      const double bc1 = 1 - std::pow(beta1, t), bc2 = 1 - std::pow(beta2, t);
      const auto denom = (v_ref.sqrt() / std::sqrt(bc2)).add_(eps);
      p_ref.addcdiv_(m_ref, denom, -(lr / bc1));

      commtune::kernels::AdamStep h;
      h.beta1 = static_cast<float>(beta1);
      h.one_minus_beta1 = static_cast<float>(1 - beta1);
      h.beta2 = static_cast<float>(beta2);
      h.one_minus_beta2 = static_cast<float>(1 - beta2);
      h.weight_decay = static_cast<float>(weight_decay);
      h.bias_correction2_sqrt = static_cast<float>(std::sqrt(bc2));
      h.eps = static_cast<float>(eps);
      h.neg_step_size = static_cast<float>(-(lr / bc1));
      h.lerp_first_moment = TORCH_VERSION_MAJOR >= 2;
      // As the engine takes it on the CPU: ATen's square root between the halves.
      commtune::kernels::adam_moments(p.data_ptr<float>(), g.data_ptr<float>(), m.data_ptr<float>(),
                                      v.data_ptr<float>(), n, h);
      const auto root = v.sqrt();
      commtune::kernels::adam_apply(p.data_ptr<float>(), m.data_ptr<float>(), root.data_ptr<float>(), n, h);
    }
    expect_bit_equal(p, p_ref, "adam params");
    expect_bit_equal(m, m_ref, "adam exp_avg");
    expect_bit_equal(v, v_ref, "adam exp_avg_sq");
  }
}

TEST(Kernels, AdamStepIsItsHalvesAroundACorrectlyRoundedRoot) {
  const std::int64_t n = 1000;
  auto p = random(n, 2), m = random(n, 3, 0.01), v = random(n, 4, 0.01).abs();
  auto p2 = p.clone(), m2 = m.clone(), v2 = v.clone();
  commtune::kernels::AdamStep h;
  h.weight_decay = 0.01f;
  h.bias_correction2_sqrt = 0.0447f;
  h.neg_step_size = -0.01f;
  for (bool lerp : {false, true}) {
    h.lerp_first_moment = lerp;
    const auto g = random(n, lerp ? 5 : 6, 0.1);
    commtune::kernels::adam_step(Device::Cpu, p.data_ptr<float>(), g.data_ptr<float>(), m.data_ptr<float>(),
                                 v.data_ptr<float>(), n, h);
    commtune::kernels::adam_moments(p2.data_ptr<float>(), g.data_ptr<float>(), m2.data_ptr<float>(),
                                    v2.data_ptr<float>(), n, h);
    std::vector<float> root(n);
    for (std::int64_t i = 0; i < n; ++i) root[i] = std::sqrt(v2.data_ptr<float>()[i]);
    commtune::kernels::adam_apply(p2.data_ptr<float>(), m2.data_ptr<float>(), root.data(), n, h);
    expect_bit_equal(p2, p, "params");
    expect_bit_equal(m2, m, "exp_avg");
    expect_bit_equal(v2, v, "exp_avg_sq");
  }
}

TEST(Kernels, ErrorFeedbackMatchesTheAtenOps) {
  for (std::int64_t n : {1, 7, 4096 + 3}) {
    auto gradient = random(n, 5), error = random(n, 6, 0.1), approximation = random(n, 7);
    // PyTorch's PowerSGD: input.add_(error); input_copy = input.clone(); ...; error = input_copy - approximation
    const auto x = gradient + error;
    const auto expected_error = x - approximation;
    commtune::kernels::add_into_both(Device::Cpu, gradient.data_ptr<float>(), error.data_ptr<float>(), n);
    expect_bit_equal(gradient, x, "bucket after error feedback in");
    expect_bit_equal(error, x, "error buffer after error feedback in");
    const double square_sum = commtune::kernels::subtract_and_square_sum(Device::Cpu, error.data_ptr<float>(),
                                                                         approximation.data_ptr<float>(), n);
    expect_bit_equal(error, expected_error, "new error");
    EXPECT_NEAR(square_sum, expected_error.to(at::kDouble).pow(2).sum().item<double>(), 1e-12 * square_sum);
  }
}

TEST(Kernels, Bf16SumRoundsAFloatSumOnce) {
  const std::int64_t rows = 3, n = 5000;
  const auto values = random(rows * n, 3, 10.0).to(at::kBFloat16);
  auto out = at::empty({n}, at::kBFloat16);
  commtune::kernels::sum_bf16_rows(Device::Cpu, reinterpret_cast<const std::uint16_t*>(values.data_ptr()), rows, n,
                                   reinterpret_cast<std::uint16_t*>(out.data_ptr()));
  const auto f = values.to(at::kFloat).view({rows, n});
  const auto expected = ((f[0] + f[1]) + f[2]).to(at::kBFloat16);
  expect_bit_equal(out.view(at::kShort), expected.view(at::kShort), "bf16 sum");
}

TEST(Kernels, Bf16ConversionMatchesC10) {
  const auto f = at::cat({random(10000, 4, 1e3), at::tensor({0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e-40f, 3.0e38f})});
  const auto expected = f.to(at::kBFloat16).view(at::kShort);
  const float* src = f.data_ptr<float>();
  const auto* want = reinterpret_cast<const std::uint16_t*>(expected.data_ptr());
  for (std::int64_t i = 0; i < f.numel(); ++i) {
    const auto mine = commtune::kernels::float_to_bf16(src[i]);
    if (std::isnan(src[i])) {  // ATen's own scalar and vector casts disagree on NaN's bits
      ASSERT_TRUE(std::isnan(commtune::kernels::bf16_to_float(mine)));
      continue;
    }
    ASSERT_EQ(mine, want[i]) << "at " << src[i];
    ASSERT_EQ(commtune::kernels::bf16_to_float(want[i]), static_cast<float>(at::BFloat16(src[i])));
  }
}

TEST(Kernels, CudaWithoutAGpuFailsClearly) {
  if (std::filesystem::exists("/dev/nvidiactl"))
    GTEST_SKIP() << "a GPU is present: scripts/gpu-check.sh runs the CUDA kernels against these CPU ones";
  float x = 0;
  // Built without CUDA: refused; built with CUDA but no device: the launch error.
  EXPECT_THROW(commtune::kernels::sgd_step(Device::Cuda, &x, &x, nullptr, 1, {}), std::runtime_error);
}

}  // namespace
