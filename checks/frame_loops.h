// What the LibTorch-free checks share to run at the machine's speed: hot loops compiled
// per ISA level, and frames spread over threads.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <system_error>
#include <thread>
#include <vector>

// A function compiled once per ISA level, the best one the CPU has picked when the
// program loads (GCC's target_clones, an ifunc): the project builds for the x86-64
// baseline (SSE2), where a float32 vector is 4 lanes wide; AVX2 has 8, AVX-512 16.
// Elsewhere (clang, other CPUs) one baseline version.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define FRAMEGATE_SIMD_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define FRAMEGATE_SIMD_CLONES
#endif
// Helpers of a cloned function: inlined into each clone, so compiled for its ISA.
#define FRAMEGATE_INLINE inline __attribute__((always_inline))

namespace framegate {

// Calls work(t) for t in [0, n) on up to num_threads threads (the calling one included),
// each taking the next frame from a shared counter; each thread gets its own `work` from
// make_work() (for per-thread buffers). Should a thread fail to start, the others do its
// share.
template <typename MakeWork>
void ForEachFrame(int64_t n, int num_threads, const MakeWork& make_work) {
  std::atomic<int64_t> next{0};
  auto loop = [&]() {
    auto work = make_work();
    for (int64_t t = next++; t < n; t = next++) work(t);
  };
  const int64_t extra_threads = std::min<int64_t>(std::max(num_threads, 1), n) - 1;
  std::vector<std::thread> workers;
  for (int64_t i = 0; i < extra_threads; ++i) {
    try {
      workers.emplace_back(loop);
    } catch (const std::system_error&) {
      break;
    }
  }
  loop();
  for (std::thread& w : workers) w.join();
}

}  // namespace framegate
