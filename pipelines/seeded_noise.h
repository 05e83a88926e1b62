// Seeded standard-normal numbers that do not depend on LibTorch's RNG, its version or the
// thread count: element i of stream s under seed k is a pure function of (k, s, i).
// Every device starts from the same numbers because they are always drawn here, on the
// CPU, in FP32. pipelines/crosscheck/seeded_noise.py is the NumPy twin of this generator.
//
//   key     = mix64(seed * 0x9E3779B97F4A7C15 + mix64(stream))
//   word(n) = mix64(key + n * 0x9E3779B97F4A7C15)              (splitmix64 finaliser)
//   pair j: u1 = ((word(2j) >> 11) + 1) * 2^-53, u2 = (word(2j+1) >> 11) * 2^-53
//           r = sqrt(-2 ln u1); z[2j] = r cos(2 pi u2), z[2j+1] = r sin(2 pi u2)
#pragma once

#include <cstdint>
#include <string_view>

#include <ATen/core/Tensor.h>

namespace framegate {

// 64-bit FNV-1a of a name: the stream of a named tensor (a weight, "noise", "cond").
uint64_t StreamOf(std::string_view name);

// A float32 CPU tensor of the given shape filled with N(0, 1) numbers.
at::Tensor SeededNormal(uint64_t seed, uint64_t stream, at::IntArrayRef shape);

}  // namespace framegate
