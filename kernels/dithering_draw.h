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

// Element `index`'s draw: 24 uniform bits. The index enters through its
// Weyl step, index * kDrawWeyl, which vectorised code keeps as a running sum.
COMMTUNE_HD std::uint32_t dithering_draw_bits(std::uint32_t index, std::uint64_t key) {
  return murmur_finalise((index * kDrawWeyl + static_cast<std::uint32_t>(key)) ^
                         static_cast<std::uint32_t>(key >> 32)) >>
         8;
}

// The draw as a float uniform in [0, 1) (natural levels), through int32
// (SSE2 converts signed integers only; exact either way).
COMMTUNE_HD float dithering_draw(std::uint32_t index, std::uint64_t key) {
  return static_cast<float>(static_cast<std::int32_t>(dithering_draw_bits(index, key))) * (1.0f / 16777216.0f);
}

// 1.0 in the 8.24 fixed point of linear levels.
constexpr float kFixedOne = 16777216.0f;

// The factor that takes |x| to its linear level in 8.24 fixed point,
// levels * 2^24 / norm, as inverse * (levels * 2^24): one rounding, which
// every build makes the same way once per call.
COMMTUNE_HD float linear_scale(float inverse, std::int64_t levels) {
  return inverse * (static_cast<float>(levels) * kFixedOne);
}

// A linear level by stochastic rounding in 8.24 fixed point: floor(scaled + u)
// for u = draw / 2^24, from `fixed` = scaled * 2^24 truncated. With the draw
// uniform over 2^24 values its mean is exactly fixed / 2^24, so the rounding
// is unbiased to 2^-24 of a level; and an integer add and shift, no float
// compare, is what makes it cheap in vector lanes. The callers compute
// `fixed` as trunc(min(|x| * linear_scale, levels * 2^24)): the clamp keeps
// the level <= levels (a draw below 2^24 never carries past it).
COMMTUNE_HD std::int32_t linear_level(std::int32_t fixed, std::uint32_t draw) {
  return (fixed + static_cast<std::int32_t>(draw)) >> 24;
}

}  // namespace commtune::kernels
