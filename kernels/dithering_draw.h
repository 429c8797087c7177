// Dithering's per-element random draw, shared by the CPU and CUDA kernels so
// both round every element the same way: a hash of the element's index and
// a per-call key (not a sequential generator, so elements can be visited in
// any order, in parallel).
#pragma once

#include <cstdint>

#include "kernels/bf16.h"  // COMMTUNE_HD

namespace commtune::kernels {

// The multipliers of the index's Weyl step and of murmur3's finaliser (the
// SIMD encoders spell the same steps out in vector registers).
constexpr std::uint32_t kDrawWeyl = 0x9e3779b9u, kMurmurFirst = 0x85ebca6bu, kMurmurSecond = 0xc2b2ae35u;

COMMTUNE_HD std::uint32_t murmur_finalise(std::uint32_t h) {
  h ^= h >> 16;
  h *= kMurmurFirst;
  h ^= h >> 13;
  h *= kMurmurSecond;
  h ^= h >> 16;
  return h;
}

// Uniform in [0, 1) with 24 bits, through int32 (SSE2 converts signed
// integers only; exact either way).
COMMTUNE_HD float dithering_draw(std::uint32_t index, std::uint32_t key_low, std::uint32_t key_high) {
  const auto bits = static_cast<std::int32_t>(murmur_finalise((index ^ key_high) * kDrawWeyl + key_low) >> 8);
  return static_cast<float>(bits) * (1.0f / 16777216.0f);
}

}  // namespace commtune::kernels
