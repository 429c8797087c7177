// The CUDA kernels must produce the CPU kernels' bits. Needs a GPU: exits 77
// (ctest's "skipped") where there is none. scripts/gpu-check.sh runs it.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/compress.h"
#include "kernels/kernels.h"

namespace {

using commtune::kernels::Device;

int failures = 0;

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(err));
    std::exit(1);
  }
}

template <class T>
struct DeviceCopy {
  explicit DeviceCopy(const std::vector<T>& host) : n(host.size()) {
    check(cudaMalloc(&ptr, n * sizeof(T) + 1), "cudaMalloc");
    check(cudaMemcpy(ptr, host.data(), n * sizeof(T), cudaMemcpyHostToDevice), "to device");
  }
  ~DeviceCopy() { cudaFree(ptr); }
  std::vector<T> back() const {
    std::vector<T> out(n);
    check(cudaMemcpy(out.data(), ptr, n * sizeof(T), cudaMemcpyDeviceToHost), "to host");
    return out;
  }
  T* ptr = nullptr;
  std::size_t n;
};

template <class T>
void expect_same(const std::vector<T>& cpu, const DeviceCopy<T>& gpu, const char* what, std::size_t n) {
  check(cudaDeviceSynchronize(), what);
  const auto g = gpu.back();
  std::size_t differ = 0;
  for (std::size_t i = 0; i < cpu.size(); ++i) differ += std::memcmp(&cpu[i], &g[i], sizeof(T)) != 0;
  std::printf("%-28s n=%-9zu %s (%zu of %zu elements differ)\n", what, n, differ ? "DIFFERS" : "bit-identical", differ,
              cpu.size());
  failures += differ != 0;
}

std::vector<float> random_floats(std::size_t n, std::mt19937& rng, float scale) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// The compressors' element-wise kernels (kernels/compress.h).
void check_compressors(std::size_t n, std::mt19937& rng) {
  namespace k = commtune::kernels;
  const auto x = random_floats(n, rng, 0.5f);
  DeviceCopy<float> dx(x);
  const std::size_t word_count = (n + 31) / 32;
  std::vector<std::uint32_t> words(word_count);
  DeviceCopy<std::uint32_t> dwords(words);
  k::onebit_signs(Device::Cpu, x.data(), static_cast<std::int64_t>(n), words.data());
  k::onebit_signs(Device::Cuda, dx.ptr, static_cast<std::int64_t>(n), dwords.ptr);
  expect_same(words, dwords, "onebit signs", n);

  // onebit's scale in the CPU's summation order; lands in device memory.
  std::vector<float> partial(static_cast<std::size_t>(k::onebit_scale_scratch(static_cast<std::int64_t>(n))) + 1);
  DeviceCopy<float> dpartial(partial);
  std::vector<float> scale(1);
  DeviceCopy<float> dscale(scale);
  k::onebit_scale(Device::Cpu, x.data(), static_cast<std::int64_t>(n), true, partial.data(), scale.data());
  k::onebit_scale(Device::Cuda, dx.ptr, static_cast<std::int64_t>(n), true, dpartial.ptr, dscale.ptr);
  expect_same(scale, dscale, "onebit scale", n);

  auto momentum = random_floats(n, rng, 0.3f);
  auto folded = x;
  DeviceCopy<float> dmomentum(momentum), dfolded(folded);
  k::nesterov_fold(Device::Cpu, folded.data(), momentum.data(), static_cast<std::int64_t>(n), 0.9f);
  k::nesterov_fold(Device::Cuda, dfolded.ptr, dmomentum.ptr, static_cast<std::int64_t>(n), 0.9f);
  expect_same(folded, dfolded, "nesterov fold (x)", n);
  expect_same(momentum, dmomentum, "nesterov fold (momentum)", n);

  auto acc = random_floats(n, rng, 1.0f);
  DeviceCopy<float> dacc(acc);
  k::onebit_unpack_add(Device::Cpu, words.data(), static_cast<std::int64_t>(n), 0.37f, 0.25f, acc.data());
  k::onebit_unpack_add(Device::Cuda, dwords.ptr, static_cast<std::int64_t>(n), 0.37f, 0.25f, dacc.ptr);
  expect_same(acc, dacc, "onebit unpack-add", n);

  // Distinct indices (topk's): every element of `acc` gets at most one add.
  std::vector<std::uint32_t> indices(n);
  for (std::size_t i = 0; i < n; ++i) indices[i] = static_cast<std::uint32_t>(i);
  std::shuffle(indices.begin(), indices.end(), rng);
  indices.resize((n + 9) / 10);
  const auto kept = static_cast<std::int64_t>(indices.size());
  std::vector<float> values(indices.size());
  DeviceCopy<std::uint32_t> dindices(indices);
  DeviceCopy<float> dvalues(values);
  k::gather_scaled(Device::Cpu, x.data(), indices.data(), kept, 10.0f, values.data());
  k::gather_scaled(Device::Cuda, dx.ptr, dindices.ptr, kept, 10.0f, dvalues.ptr);
  expect_same(values, dvalues, "gather (scaled)", n);
  k::scatter_add(Device::Cpu, indices.data(), values.data(), kept, 0.5f, acc.data());
  k::scatter_add(Device::Cuda, dindices.ptr, dvalues.ptr, kept, 0.5f, dacc.ptr);
  expect_same(acc, dacc, "scatter-add (distinct indices)", n);

  for (const bool natural : {false, true}) {
    k::DitheringOptions options;
    options.levels = natural ? 6 : 4;
    options.natural = natural;
    std::vector<std::uint8_t> q(n);
    DeviceCopy<std::uint8_t> dq(q);
    const std::uint64_t key = 0x9e3779b97f4a7c15ull ^ n;
    k::dithering_levels(Device::Cpu, x.data(), 0, static_cast<std::int64_t>(n), 0.9f, options, key, q.data());
    k::dithering_levels(Device::Cuda, dx.ptr, 0, static_cast<std::int64_t>(n), 0.9f, options, key, dq.ptr);
    expect_same(q, dq, natural ? "dithering levels (natural)" : "dithering levels (linear)", n);
  }
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::puts("no CUDA device: skipped");
    return 77;
  }
  std::mt19937 rng(7);
  for (std::size_t n : {std::size_t{1}, std::size_t{1000}, std::size_t{(1 << 20) + 3}}) {
    auto p = random_floats(n, rng, 1.0f), g = random_floats(n, rng, 0.1f), b = random_floats(n, rng, 0.1f);
    auto v = random_floats(n, rng, 0.01f);
    for (auto& x : v) x = x * x;

    DeviceCopy<float> dp(p), dg(g), db(b);
    commtune::kernels::SgdStep sgd;
    sgd.lr = 0.05f;
    sgd.momentum = 0.9f;
    sgd.weight_decay = 1e-4f;
    sgd.nesterov = true;
    for (int step = 0; step < 3; ++step) {
      sgd.first_step = step == 0;
      commtune::kernels::sgd_step(Device::Cpu, p.data(), g.data(), b.data(), n, sgd);
      commtune::kernels::sgd_step(Device::Cuda, dp.ptr, dg.ptr, db.ptr, n, sgd);
    }
    expect_same(p, dp, "sgd (nesterov, decay)", n);
    expect_same(b, db, "sgd momentum buffer", n);

    DeviceCopy<float> dm(b), dv(v);
    auto m = b;
    commtune::kernels::AdamStep adam;
    adam.weight_decay = 0.01f;
    adam.bias_correction2_sqrt = 0.0447f;
    adam.neg_step_size = -0.01f;
    for (int step = 0; step < 6; ++step) {
      adam.lerp_first_moment = step >= 3;  // 1.13's first moment, then 2.x's lerp
      commtune::kernels::adam_step(Device::Cpu, p.data(), g.data(), m.data(), v.data(), n, adam);
      commtune::kernels::adam_step(Device::Cuda, dp.ptr, dg.ptr, dm.ptr, dv.ptr, n, adam);
    }
    expect_same(p, dp, "adam", n);
    expect_same(m, dm, "adam exp_avg", n);
    expect_same(v, dv, "adam exp_avg_sq", n);

    auto e = random_floats(n, rng, 0.1f), approx = random_floats(n, rng, 1.0f), x = g;
    DeviceCopy<float> dx(x), de(e), dapprox(approx);
    commtune::kernels::add_into_both(Device::Cpu, x.data(), e.data(), n);
    commtune::kernels::add_into_both(Device::Cuda, dx.ptr, de.ptr, n);
    expect_same(x, dx, "error feedback in", n);
    const double cpu_sum = commtune::kernels::subtract_and_square_sum(Device::Cpu, e.data(), approx.data(), n);
    const double gpu_sum = commtune::kernels::subtract_and_square_sum(Device::Cuda, de.ptr, dapprox.ptr, n);
    expect_same(e, de, "error feedback out", n);
    if (std::abs(cpu_sum - gpu_sum) > 1e-9 * std::abs(cpu_sum)) {
      std::printf("error feedback square sums differ: %.17g vs %.17g\n", cpu_sum, gpu_sum);
      ++failures;
    }

    std::vector<std::uint16_t> rows(3 * n), out(n);
    for (auto& r : rows) r = static_cast<std::uint16_t>(rng() & 0x7f7f);  // finite bf16 values of both signs
    DeviceCopy<std::uint16_t> drows(rows), dout(out);
    commtune::kernels::sum_bf16_rows(Device::Cpu, rows.data(), 3, n, out.data());
    commtune::kernels::sum_bf16_rows(Device::Cuda, drows.ptr, 3, n, dout.ptr);
    expect_same(out, dout, "bf16 sum of 3 rows", n);

    check_compressors(n, rng);
  }
  std::printf("%s\n", failures ? "FAILED" : "all CUDA kernels match the CPU kernels bit for bit");
  return failures ? 1 : 0;
}
