#include "pipelines/seeded_noise.h"

#include <cmath>

#include <ATen/Functions.h>
#include <ATen/Parallel.h>

namespace framegate {
namespace {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ULL;

uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

}  // namespace

uint64_t StreamOf(std::string_view name) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (char c : name) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001b3ULL;
  }
  return h;
}

at::Tensor SeededNormal(uint64_t seed, uint64_t stream, at::IntArrayRef shape) {
  at::Tensor out = at::empty(shape, at::kFloat);
  float* data = out.data_ptr<float>();
  const int64_t n = out.numel();
  const uint64_t key = Mix64(seed * kGolden + Mix64(stream));
  const int64_t pairs = (n + 1) / 2;
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  constexpr double kInv53 = 1.0 / 9007199254740992.0;  // 2^-53
  at::parallel_for(0, pairs, 4096, [&](int64_t begin, int64_t end) {
    for (int64_t j = begin; j < end; ++j) {
      const uint64_t a = Mix64(key + static_cast<uint64_t>(2 * j) * kGolden);
      const uint64_t b = Mix64(key + static_cast<uint64_t>(2 * j + 1) * kGolden);
      const double u1 = static_cast<double>((a >> 11) + 1) * kInv53;
      const double u2 = static_cast<double>(b >> 11) * kInv53;
      const double r = std::sqrt(-2.0 * std::log(u1));
      data[2 * j] = static_cast<float>(r * std::cos(kTwoPi * u2));
      if (2 * j + 1 < n) data[2 * j + 1] = static_cast<float>(r * std::sin(kTwoPi * u2));
    }
  });
  return out;
}

}  // namespace framegate
