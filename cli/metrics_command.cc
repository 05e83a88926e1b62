// framegate metrics REF CAND: PSNR/SSIM per frame and the video metrics of two videos,
// plus the health of CAND. A video is a .npy file (float32 [T, H, W, 3] in [0, 1], or
// uint8) or a folder of PNG frames (sorted by name).
#include <ATen/ATen.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include <nlohmann/json.hpp>

#include "harness/cell_result_json.h"
#include "cli/commands.h"
#include "cli/output_file.h"
#include "harness/checks/frame_health.h"
#include "harness/checks/frame_metrics.h"
#include "harness/npy.h"
#include "harness/png_frames.h"

namespace framegate {
namespace {

struct MetricsOptions {
  std::string ref;
  std::string cand;
  std::string json_path;  // --json FILE, "-" for stdout
  int threads = 1;
};

StatusOr<at::Tensor> ReadPngFolder(const std::string& dir) {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".png") files.push_back(entry.path().string());
  }
  if (files.empty()) return Status::InvalidInput(dir + ": no .png frames in the folder");
  std::sort(files.begin(), files.end());
  std::vector<at::Tensor> frames;
  for (const std::string& f : files) {
    StatusOr<RgbImage> img = ReadPngRgb(f);
    if (!img.ok()) return img.status();
    if (!frames.empty() && (img->height != frames[0].size(0) || img->width != frames[0].size(1))) {
      return Status::InvalidInput(f + ": " + std::to_string(img->width) + "x" +
                                  std::to_string(img->height) + " differs from the first frame");
    }
    frames.push_back(at::from_blob(img->pixels.data(), {img->height, img->width, 3}, at::kByte)
                         .to(at::kFloat)
                         .div(255.0));
  }
  return at::stack(frames);
}

// A video [T, H, W, 3] float32 from a .npy file or a PNG folder.
StatusOr<at::Tensor> ReadVideo(const std::string& path) {
  if (std::filesystem::is_directory(path)) return ReadPngFolder(path);
  StatusOr<NpyArray> npy = ReadNpy(path);
  if (!npy.ok()) return npy.status();
  if (npy->shape.size() != 4 || npy->shape[3] != 3) {
    std::string shape;
    for (int64_t d : npy->shape) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
    return Status::InvalidInput(path + ": shape [" + shape + "], expected [T, H, W, 3]");
  }
  std::vector<float> values = npy->ToFloat32(/*scale_uint8=*/true);
  return at::from_blob(values.data(), npy->shape, at::kFloat).clone();
}

VideoView ViewOf(const at::Tensor& v) {
  return {v.data_ptr<float>(), v.size(0), v.size(1), v.size(2), v.size(3)};
}

std::string Db(double psnr) {
  char buf[32];
  std::snprintf(buf, sizeof buf, std::isinf(psnr) ? "inf" : "%.3f", psnr);
  return buf;
}

int RunMetrics(const MetricsOptions& o) {
  StatusOr<at::Tensor> ref = ReadVideo(o.ref);
  if (!ref.ok()) return ReportError(ref.status());
  StatusOr<at::Tensor> cand = ReadVideo(o.cand);
  if (!cand.ok()) return ReportError(cand.status());
  const Status same = CheckSameShape(ViewOf(*ref), ViewOf(*cand));
  if (!same.ok()) return ReportError(Status::InvalidInput(o.ref + " vs " + o.cand + ": " + same.message()));
  ComparisonMetrics m;
  m.video = ComputeVideoMetrics(ViewOf(*ref), ViewOf(*cand), {o.threads});
  m.latent_cosine = CosineSimilarity(ref->data_ptr<float>(), cand->data_ptr<float>(), ref->numel());
  // No decoder output here: the frames themselves stand in for it ([0, 1] -> [-1, 1]).
  const at::Tensor decoded = (*cand * 2 - 1).permute({3, 0, 1, 2}).unsqueeze(0);
  const FrameHealth health = AssessFrameHealth(decoded, *cand, *ref, {});
  if (!o.json_path.empty()) {
    nlohmann::json j = MetricsToJson(m);
    j.erase("latent_cosine");
    j["cosine"] = m.latent_cosine;
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
    std::printf("%5zu  %-9s  %.6f  %s\n", t, Db(m.video.frames[t].psnr).c_str(),
                m.video.frames[t].ssim, FrameDefectName(health.frames[t]));
  }
  std::printf("min_psnr %s dB, mean_ssim %.6f, min_ssim %.6f, max_abs %.6g, rel_l2 %.6g, "
              "temporal_rel_l2 %.6g, cosine %.8f\n",
              Db(m.video.min_psnr).c_str(), m.video.mean_ssim, m.video.min_ssim, m.video.max_abs,
              m.video.rel_l2, m.video.temporal_rel_l2, m.latent_cosine);
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
      ->required()->check(CLI::ExistingPath);
  app->add_option("CAND", o->cand, "Candidate video, same form and shape")
      ->required()->check(CLI::ExistingPath);
  AddOutputFileOption(app, "--json", &o->json_path,
                      "Write the metrics as JSON (null for an infinite PSNR)");
  app->add_option("--threads", o->threads, "Threads over frames")->check(CLI::Range(1, 4096));
  return {app, [o] { return RunMetrics(*o); }};
}

}  // namespace framegate
