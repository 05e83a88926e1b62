// Test-only: a small run with one cell per interesting status, shared by the report tests.
#pragma once

#include <filesystem>
#include <string>

#include "harness/run_record.h"

namespace framegate {
namespace testing_data {

inline CellResult MakeResult(const std::string& device, const std::string& policy, CellStatus status,
                             const std::string& reason) {
  CellResult r;
  r.cell.device = device;
  r.cell.policy = policy;
  r.policy_used = policy;
  r.status = status;
  r.reason = reason;
  r.repro = "framegate check --size tiny --device " + device + " --policy " + policy;
  return r;
}

inline ComparisonMetrics MakeMetrics(double min_psnr, double mean_ssim, int frames) {
  ComparisonMetrics m;
  for (int t = 0; t < frames; ++t) m.video.frames.push_back({min_psnr + t, mean_ssim});
  m.video.min_psnr = min_psnr;
  m.video.mean_ssim = mean_ssim;
  m.video.min_ssim = mean_ssim;
  m.latent_cosine = 0.999;
  return m;
}

// cpu: PASS fp32 (3 repeats), FAIL bf16, NONFINITE fp16-emulated (with probes, the op of
// the first NaN and the advisor's answer), ERROR fp8-e5m2 (with the module and op that
// raised); UNSUPPORTED fp16; cuda:0: TIMEOUT fp32, XFAIL bf16.
inline RunRecord SampleRun() {
  RunRecord run;
  run.info.run_id = "20250101T020000Z-0badc0de";
  run.info.started_at = "2025-01-01T02:00:00Z";
  run.info.finished_at = "2025-01-01T02:05:00Z";
  run.info.state = "finished";
  run.info.host = "nightly-01";
  run.info.git_sha = "e93dd37abcde";
  run.info.libtorch_version = "1.13.1";
  run.devices = {{"cpu", "Intel Xeon", "avx2", 1LL << 36, ""},
                 {"cuda:0", "NVIDIA H100", "9.0", 80LL << 30, "550.54"}};
  CellResult pass = MakeResult("cpu", "fp32", CellStatus::kPass, "");
  pass.metrics = MakeMetrics(41.5, 0.998, 4);
  pass.timings.generation_seconds = {1.2, 1.0, 1.4};
  pass.timings.load_seconds = 0.5;
  CellResult fail = MakeResult("cpu", "bf16", CellStatus::kFail, "min_psnr 23.1 < 30");
  fail.metrics = MakeMetrics(23.1, 0.91, 4);
  fail.timings.generation_seconds = {2.0};
  CellResult nonfinite = MakeResult("cpu", "fp16-emulated", CellStatus::kNonfinite,
                                    "NaN at step 3 in blocks.0.spatial_attn.logits");
  nonfinite.metrics = MakeMetrics(INFINITY, NAN, 4);
  nonfinite.health.defect = FrameDefect::kNonfinite;
  nonfinite.health.frames.assign(4, FrameDefect::kNonfinite);
  nonfinite.first_nonfinite = {true, 3, "blocks.0.spatial_attn.logits", "aten::exp", {10, 0}};
  nonfinite.probes = {{"blocks.0.spatial_attn.logits", "float16", 65504, 0.01, 0, 0, 12.5},
                      {"decoder.out", "float16", 2.0, 0, 0, 14.9}};  // SQNR not measured
  nonfinite.observed = "37 module calls, 212 ops watched; 1 free function not entered";
  nonfinite.cell.policy_file = "matrix/<islands>.toml";
  Advice advice;
  advice.status_before = CellStatus::kNonfinite;
  advice.status_after = CellStatus::kPass;
  advice.islands = {"blocks.0.spatial_attn", "blocks.<1>.ff"};
  advice.policy_name = "fp16-emulated-islands";
  advice.policy_toml =
      "[policy.fp16-emulated-islands]\nbased_on = \"fp16-emulated\"\n"
      "fp32_modules = [\"blocks.0.spatial_attn\", \"blocks.<1>.ff\"]\n";
  advice.fp32_weight_fraction = 0.0625;
  advice.runs = {{{"blocks.0.spatial_attn"}, CellStatus::kFail, "min_psnr 28 < 30"},
                 {advice.islands, CellStatus::kPass, ""}};
  nonfinite.advice = advice;
  CellResult error =
      MakeResult("cpu", "fp8-e5m2", CellStatus::kError, "dtype_mismatch: expected Float but found Half");
  error.error_class = "dtype_mismatch";
  error.error_module = "denoiser.embed.time_mlp.0";
  error.error_op = "aten::linear";
  CellResult unsupported = MakeResult("cpu", "fp16", CellStatus::kUnsupported, "no FP16 matmul on the CPU");
  CellResult timeout = MakeResult("cuda:0", "fp32", CellStatus::kTimeout, "no result after 600 s");
  CellResult xfail = MakeResult("cuda:0", "bf16", CellStatus::kXfail, "min_psnr 20 < 30");
  xfail.cell.xfail = "known bf16 drift";
  run.cells = {pass, fail, nonfinite, error, unsupported, timeout, xfail};
  return run;
}

// A fresh empty folder under the system temp folder.
inline std::string FreshDir(const std::string& name) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("fg_reports_" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

}  // namespace testing_data
}  // namespace framegate
