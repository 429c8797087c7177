// Fused optimizer and reduction kernels: bandwidth next to memcpy's, and
// time next to the ATen op sequence PyTorch's optimizers run, all measured
// here in one run on one thread.
//
//   build/bench/kernels_bench
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <cmath>
#include <cstdio>
#include <cstring>

#include "bench/bench_timing.h"
#include "kernels/kernels.h"

using commtune::bench::median_seconds;
using commtune::kernels::Device;

int main() {
  at::set_num_threads(1);
  std::printf("%-10s %-26s %10s %10s %12s %14s\n", "elements", "kernel", "time", "GB/s", "vs memcpy", "vs ATen ops");
  for (std::int64_t n : {1LL << 20, 16LL << 20}) {
    auto p = at::randn({n}), g = at::randn({n}), m = at::randn({n}), v = at::rand({n}), dst = at::empty({n});
    const double copy_s = median_seconds([&] { std::memcpy(dst.data_ptr(), p.data_ptr(), n * 4); });
    const double copy_bw = 8.0 * n / copy_s;  // read + write
    auto row = [&](const char* name, double seconds, double bytes, double aten_seconds) {
      const double bw = bytes / seconds;
      std::printf("%-10lld %-26s %8.3f ms %10.1f %11.2fx", static_cast<long long>(n), name, 1e3 * seconds, bw / 1e9,
                  bw / copy_bw);
      if (aten_seconds > 0) std::printf(" %13.2fx", aten_seconds / seconds);
      std::printf("\n");
    };
    row("memcpy (reference)", copy_s, 8.0 * n, 0);

    commtune::kernels::SgdStep sgd;
    sgd.lr = 0.05f;
    sgd.momentum = 0.9f;
    const double sgd_s = median_seconds([&] {
      commtune::kernels::sgd_step(Device::Cpu, p.data_ptr<float>(), g.data_ptr<float>(), m.data_ptr<float>(), n, sgd);
    });
    const double sgd_aten = median_seconds([&] {
      m.mul_(0.9).add_(g);
      p.add_(m, -0.05);
    });
    row("sgd momentum (fused)", sgd_s, 20.0 * n, sgd_aten);

    commtune::kernels::AdamStep adam;
    adam.bias_correction2_sqrt = 0.5f;
    adam.neg_step_size = -1e-3f;
    const double adam_s = median_seconds([&] {
      commtune::kernels::adam_step(Device::Cpu, p.data_ptr<float>(), g.data_ptr<float>(), m.data_ptr<float>(),
                                   v.data_ptr<float>(), n, adam);
    });
    const double adam_aten = median_seconds([&] {
      m.mul_(0.9).add_(g, 0.1);
      v.mul_(0.999).addcmul_(g, g, 0.001);
      const auto denom = (v.sqrt() / 0.5).add_(1e-8);
      p.addcdiv_(m, denom, -1e-3);
    });
    row("adam (fused)", adam_s, 28.0 * n, adam_aten);

    auto rows = at::randn({2 * n}).to(at::kBFloat16);
    auto out = at::empty({n}, at::kBFloat16);
    const double sum_s = median_seconds([&] {
      commtune::kernels::sum_bf16_rows(Device::Cpu, reinterpret_cast<const std::uint16_t*>(rows.data_ptr()), 2, n,
                                       reinterpret_cast<std::uint16_t*>(out.data_ptr()));
    });
    const double sum_aten = median_seconds([&] {
      auto f = rows.view({2, n}).to(at::kFloat);
      out.copy_(f[0] + f[1]);
    });
    row("bf16 sum of 2 rows", sum_s, 6.0 * n, sum_aten);
  }
  std::printf(
      "\nGB/s counts the bytes each kernel must move (sgd 20, adam 28, bf16 sum 6 per element);\n"
      "\"vs memcpy\" is that bandwidth over memcpy's, \"vs ATen ops\" the speedup over the unfused ops.\n");
}
