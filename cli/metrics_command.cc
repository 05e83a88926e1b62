// framegate metrics REF CAND: PSNR/SSIM per frame and the video metrics of two videos,
// plus the health of CAND. A video is a .npy file (float32 [T, H, W, 3] in [0, 1], or
// uint8) or a folder of PNG frames (sorted by name).
//
// No LibTorch here (the small `framegate` front serves this command without it): the
// videos are plain float32 buffers, each .npy read once (mapped; float32 used in place,
// other dtypes converted once), scored on every core by default.
#include <sched.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <new>
#include <optional>

#include <nlohmann/json.hpp>

#include "checks/frame_metrics.h"
#include "checks/video_health.h"
#include "cli/command.h"
#include "cli/output_file.h"
#include "harness/cell_result_json.h"
#include "harness/npy.h"
#include "harness/png_frames.h"

namespace framegate {
namespace {

struct MetricsOptions {
  std::string ref;
  std::string cand;
  std::string json_path;  // --json FILE, "-" for stdout
  int threads = 0;        // 0: every core this process may use
};

// Cores this process may run on (its affinity mask), at least 1.
int AffinityCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

// A video [T, H, W, C] float32 and what holds its values: the mapped .npy file itself,
// or `values` (converted from uint8/float64, or decoded from PNG).
struct Video {
  VideoView view;
  std::optional<NpyFile> npy;
  std::vector<float> values;
};

StatusOr<Video> ReadPngFolder(const std::string& dir) {
  std::vector<std::string> files;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() == ".png") files.push_back(it->path().string());
  }
  if (ec) return Status::IoError(dir + ": cannot list the folder: " + ec.message());
  if (files.empty()) return Status::InvalidInput(dir + ": no .png frames in the folder");
  std::sort(files.begin(), files.end());
  Video video;
  for (size_t t = 0; t < files.size(); ++t) {
    StatusOr<RgbImage> img = ReadPngRgb(files[t]);
    if (!img.ok()) return img.status();
    if (t == 0) {
      video.view = {nullptr, static_cast<int64_t>(files.size()), img->height, img->width, 3};
      try {  // each frame is bounded (png_frames.h), their number is not
        video.values.resize(video.view.NumElements());
      } catch (const std::bad_alloc&) {
        return Status::InvalidInput(dir + ": " + video.view.ShapeString() +
                                    " float32 does not fit in memory");
      }
    } else if (img->height != video.view.height || img->width != video.view.width) {
      return Status::InvalidInput(files[t] + ": " + std::to_string(img->width) + "x" +
                                  std::to_string(img->height) + " differs from the first frame");
    }
    float* out = video.values.data() + t * img->height * img->width * 3;
    for (size_t i = 0; i < img->pixels.size(); ++i) out[i] = img->pixels[i] / 255.0f;
  }
  video.view.data = video.values.data();
  return video;
}

// A video [T, H, W, 3] float32 from a .npy file or a PNG folder.
StatusOr<Video> ReadVideo(const std::string& path) {
  if (std::filesystem::is_directory(path)) return ReadPngFolder(path);
  StatusOr<NpyFile> npy = OpenNpy(path);
  if (!npy.ok()) return npy.status();
  const std::vector<int64_t>& shape = npy->shape();
  if (shape.size() != 4 || shape[3] != 3) {
    std::string text;
    for (int64_t d : shape) text += (text.empty() ? "" : ", ") + std::to_string(d);
    return Status::InvalidInput(path + ": shape [" + text + "], expected [T, H, W, 3]");
  }
  Video video;
  video.view = {nullptr, shape[0], shape[1], shape[2], shape[3]};
  if (const float* in_place = npy->Float32InPlace()) {
    video.view.data = in_place;
  } else {
    video.values.resize(npy->NumElements());
    npy->CopyToFloat32(video.values.data(), /*scale_uint8=*/true);
    video.view.data = video.values.data();
  }
  video.npy = std::move(npy).value();
  return video;
}

// The video at `path`, refused when it has no values: no frame of it could be compared,
// and an empty comparison must not read as agreement.
StatusOr<Video> ReadNonEmptyVideo(const std::string& path) {
  StatusOr<Video> video = ReadVideo(path);
  if (video.ok() && video->view.NumElements() == 0) {
    return Status::InvalidInput(path + ": empty video " + video->view.ShapeString() + ", nothing to compare");
  }
  return video;
}

// "12.345", "inf" (identical frames), "nan" (not defined: a NaN or Inf in the frames).
std::string Db(double psnr) {
  if (std::isnan(psnr)) return "nan";
  if (std::isinf(psnr)) return psnr > 0 ? "inf" : "-inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", psnr);
  return buf;
}

int RunMetrics(const MetricsOptions& o) {
  StatusOr<Video> ref_video = ReadNonEmptyVideo(o.ref);
  if (!ref_video.ok()) return ReportError(ref_video.status());
  StatusOr<Video> cand_video = ReadNonEmptyVideo(o.cand);
  if (!cand_video.ok()) return ReportError(cand_video.status());
  const VideoView& ref = ref_video->view;
  const VideoView& cand = cand_video->view;
  const Status same = CheckSameShape(ref, cand);
  if (!same.ok()) return ReportError(Status::InvalidInput(o.ref + " vs " + o.cand + ": " + same.message()));
  const int threads = o.threads > 0 ? o.threads : AffinityCores();
  ComparisonMetrics m;
  m.video = ComputeVideoMetrics(ref, cand, {threads});
  m.latent_cosine = m.video.cosine;  // CosineSimilarity of the frames, from the same pass
  // No decoder output here: the frames themselves stand in for it, in its range
  // (2 * frame - 1), so a huge finite value that overflows there counts as Inf.
  const FrameHealth health =
      AssessVideoHealth(cand, CountNonfiniteFrames(cand, 2.0f, -1.0f, threads), ref, {}, {}, threads);
  if (!o.json_path.empty()) {
    nlohmann::json j = MetricsToJson(m);
    j["cosine"] = j["latent_cosine"];  // as MetricsToJson writes it: NaN is "NaN", not null
    j.erase("latent_cosine");
    nlohmann::json frames = nlohmann::json::array();
    for (FrameDefect d : health.frames) frames.push_back(FrameDefectName(d));
    j["health"] = {{"defect", FrameDefectName(health.defect)},
                   {"defect_frames", health.defect_frames},
                   {"nan", health.decoded.nan},
                   {"inf", health.decoded.inf},
                   {"frames", frames}};
    const Status written = WriteOutputFile(o.json_path, j.dump(2) + "\n");
    if (!written.ok()) return ReportError(written);
    if (o.json_path == "-") return kExitOk;
  }
  std::printf("frame  psnr_db    ssim      health\n");
  for (size_t t = 0; t < m.video.frames.size(); ++t) {
    std::printf("%5zu  %-9s  %.6f  %s\n", t, Db(m.video.frames[t].psnr).c_str(), m.video.frames[t].ssim,
                FrameDefectName(health.frames[t]));
  }
  std::printf(
      "min_psnr %s dB, mean_ssim %.6f, min_ssim %.6f, max_abs %.6g, rel_l2 %.6g, "
      "temporal_rel_l2 %.6g, cosine %.8f\n",
      Db(m.video.min_psnr).c_str(), m.video.mean_ssim, m.video.min_ssim, m.video.max_abs, m.video.rel_l2,
      m.video.temporal_rel_l2, m.latent_cosine);
  std::printf("candidate health: %s", FrameDefectName(health.defect));
  if (health.defect != FrameDefect::kNone) std::printf(" (%d frames)", health.defect_frames);
  std::printf(", %lld NaN, %lld Inf\n", static_cast<long long>(health.decoded.nan),
              static_cast<long long>(health.decoded.inf));
  return kExitOk;
}

}  // namespace

Command AddMetricsCommand(CLI::App& parent) {
  auto o = std::make_shared<MetricsOptions>();
  CLI::App* app = parent.add_subcommand(
      "metrics", "PSNR/SSIM per frame, video errors and CAND's health, for two videos (.npy or PNG folder)");
  app->add_option("REF", o->ref, "Reference video: .npy [T, H, W, 3] or a folder of PNG frames")
      ->required()
      ->check(CLI::ExistingPath);
  app->add_option("CAND", o->cand, "Candidate video, same form and shape")
      ->required()
      ->check(CLI::ExistingPath);
  AddOutputFileOption(app, "--json", &o->json_path,
                      "Write the metrics as JSON (null for an infinite PSNR, \"NaN\" where not defined)");
  app->add_option("--threads", o->threads, "Threads over frames (default 0: every core this process may use)")
      ->check(CLI::Range(0, 4096));
  return {app, [o] { return RunMetrics(*o); }};
}

}  // namespace framegate
