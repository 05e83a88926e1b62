// metrics_bench: times framegate's frame metrics (ComputeVideoMetrics: per-frame PSNR and
// SSIM plus the video-level values) on two .npy videos, float32 [T, H, W, C].
// Driven by bench/metrics_vs_skimage.py, which compares it with scikit-image.
//
//   metrics_bench --ref REF.npy --cand CAND.npy [--repeats N] [--threads K]
//
// --threads 0 (the default, as `framegate metrics`): every core this process may use.
// Prints one JSON object on stdout: the shape, the per-frame psnr (null = infinite; NaN
// is written as null too) and ssim of the last repeat, the video-level values, and the
// wall seconds of each repeat (compute only: the files are read once, before timing, as
// `framegate metrics` reads them: mapped, float32 used in place).
// Exit 2 on bad arguments or unreadable input.
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "checks/frame_metrics.h"
#include "harness/npy.h"

namespace {

struct Args {
  std::string ref_path, cand_path;
  int repeats = 5;
  int threads = 0;
};

bool ParseArgs(int argc, char** argv, Args* args) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--ref") {
      args->ref_path = value;
    } else if (flag == "--cand") {
      args->cand_path = value;
    } else if (flag == "--repeats") {
      args->repeats = std::atoi(value.c_str());
    } else if (flag == "--threads") {
      args->threads = std::atoi(value.c_str());
    } else {
      return false;
    }
  }
  return argc % 2 == 1 && !args->ref_path.empty() && !args->cand_path.empty() && args->repeats >= 1 &&
         args->threads >= 0;
}

// Cores this process may run on (its affinity mask), at least 1.
int AffinityCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

// Opens a [T, H, W, C] .npy video into `file`; returns its float32 view, in place when
// the file holds aligned float32, else converted into `values` (data = nullptr and a
// message on stderr on failure).
framegate::VideoView LoadVideo(const std::string& path, std::optional<framegate::NpyFile>* file,
                               std::vector<float>* values) {
  framegate::StatusOr<framegate::NpyFile> opened = framegate::OpenNpy(path);
  if (!opened.ok()) {
    std::cerr << opened.status().ToString() << "\n";
    return {};
  }
  const std::vector<int64_t> s = opened->shape();
  if (s.size() != 4) {
    std::cerr << path << ": expected a [T, H, W, C] array\n";
    return {};
  }
  const float* data = opened->Float32InPlace();
  if (data == nullptr) {
    values->resize(opened->NumElements());
    opened->CopyToFloat32(values->data());
    data = values->data();
  }
  *file = std::move(opened).value();
  return {data, s[0], s[1], s[2], s[3]};
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (!ParseArgs(argc, argv, &args)) {
    std::cerr << "usage: " << argv[0] << " --ref REF.npy --cand CAND.npy [--repeats N] [--threads K]\n";
    return 2;
  }
  std::optional<framegate::NpyFile> ref_file, cand_file;
  std::vector<float> ref_values, cand_values;
  const framegate::VideoView ref = LoadVideo(args.ref_path, &ref_file, &ref_values);
  const framegate::VideoView cand = LoadVideo(args.cand_path, &cand_file, &cand_values);
  if (ref.data == nullptr || cand.data == nullptr) return 2;
  const framegate::Status shape = framegate::CheckSameShape(ref, cand);
  if (!shape.ok()) {
    std::cerr << shape.ToString() << "\n";
    return 2;
  }

  framegate::FrameMetricsOptions options;
  options.num_threads = args.threads > 0 ? args.threads : AffinityCores();
  framegate::VideoMetrics metrics;
  nlohmann::json seconds = nlohmann::json::array();
  for (int r = 0; r < args.repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    metrics = framegate::ComputeVideoMetrics(ref, cand, options);
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    seconds.push_back(elapsed.count());
  }

  nlohmann::json out;
  out["shape"] = {ref.frames, ref.height, ref.width, ref.channels};
  out["threads"] = options.num_threads;
  out["seconds"] = seconds;
  out["psnr"] = nlohmann::json::array();
  out["ssim"] = nlohmann::json::array();
  for (const framegate::FrameScores& f : metrics.frames) {
    // JSON has no infinity: null, as in metric-vectors/*/expected.json.
    out["psnr"].push_back(std::isinf(f.psnr) ? nlohmann::json() : nlohmann::json(f.psnr));
    out["ssim"].push_back(f.ssim);
  }
  out["max_abs"] = metrics.max_abs;
  out["rel_l2"] = metrics.rel_l2;
  out["temporal_rel_l2"] = metrics.temporal_rel_l2;
  std::cout << out.dump() << "\n";
  return 0;
}
