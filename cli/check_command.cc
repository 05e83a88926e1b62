// framegate check: runs and judges the cells given by ad-hoc axes (--size | --model,
// --policy P[,P..], --device, --seed, --fault) in this process. Exit 0 when no cell
// fails (PASS, XFAIL, UNSUPPORTED), 1 otherwise, 2 on bad input.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/output_file.h"
#include "harness/build_info.h"
#include "harness/cell_result_json.h"
#include "harness/printf.h"
#include "pipelines/sdc_injection.h"
#include "runners/cell_runner.h"

namespace framegate {
namespace {

struct CheckOptions {
  PipelineCliOptions pipeline;
  std::string golden_dir;
  std::string json_path;
  std::string tolerance;
  std::string xfail;
  std::string artifacts_dir;
  bool probes = false;
  bool fp64_ref = false;
  bool ignore_calibration = false;
  int repeats = 1;
  int warmup = 0;
  int threads = 0;
  int replay = 0;
  std::string inject_sdc;
};

// `--replay`: each step's relative L2 against the golden, and the step that makes the
// largest error, per pass.
void PrintReplays(FILE* text, const CellResult& r) {
  for (size_t p = 0; p < r.replays.size(); ++p) {
    const StepReplay& pass = r.replays[p];
    std::string steps;
    size_t worst = 0;
    for (size_t i = 0; i < pass.step_rel_l2.size(); ++i) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%s%.2e", i ? " " : "", pass.step_rel_l2[i]);
      steps += buf;
      if (pass.step_rel_l2[i] > pass.step_rel_l2[worst]) worst = i;
    }
    std::string budget;  // the calibration's, when one bounds the steps
    if (!std::isnan(pass.step_budget)) {
      size_t over = 0;
      for (double e : pass.step_rel_l2) over += !(e <= pass.step_budget);
      budget = Printf("; step budget %.2e (calibration): %zu over", pass.step_budget, over);
    }
    std::fprintf(
        text,
        "              replay %zu: step rel_l2 [%s], decode %.2e; largest at step %zu%s; digest %.12s\n",
        p + 1, steps.c_str(), pass.decode_rel_l2, worst, budget.c_str(), pass.digest.c_str());
  }
}

// "min_psnr=41.2 dB, mean_ssim=0.9985" or the reason.
std::string Summary(const CellResult& r) {
  if (!r.reason.empty()) return r.reason;
  if (!r.metrics) return "";
  char buf[96];
  std::snprintf(buf, sizeof buf, "min_psnr=%.2f dB, mean_ssim=%.5f, rel_l2=%.2e", r.metrics->video.min_psnr,
                r.metrics->video.mean_ssim, r.metrics->video.rel_l2);
  return buf;
}

int RunCheck(const CheckOptions& o) {
  ConfigureThreads(o.threads);
  std::vector<Cell> cells = o.pipeline.ToCells();
  if (cells.empty()) return ReportError(Status::InvalidInput("--policy: no policy given"));
  CellRunOptions run;
  run.golden_dir = o.golden_dir;
  run.probes = o.probes;
  run.fp64_ref = o.fp64_ref;
  run.use_calibration = !o.ignore_calibration;
  run.repeats = o.repeats;
  run.warmup = o.warmup;
  run.replays = o.replay;
  run.inject_sdc = o.inject_sdc;
  if (!o.inject_sdc.empty()) {
    StatusOr<SdcSpec> spec = ParseSdcSpec(o.inject_sdc);
    if (!spec.ok()) return ReportError(spec.status());
    if (o.replay == 0) return ReportError(Status::InvalidInput("--inject-sdc needs --replay N"));
  }
  // The cells share the golden they are judged with (one per seed) and, within a
  // policy, the model.
  CellRunCache cache;
  run.cache = &cache;
  // The text goes to stderr when the JSON goes to stdout.
  FILE* text = o.json_path == "-" ? stderr : stdout;
  nlohmann::json json_cells = nlohmann::json::array();
  std::map<std::string, int> counts;
  bool failed = false;
  for (Cell& cell : cells) {
    cell.tolerance = o.tolerance;
    cell.xfail = o.xfail;
    if (!o.artifacts_dir.empty()) run.artifacts_dir = o.artifacts_dir + "/" + cell.Id();
    StatusOr<ResolvedCell> resolved = ResolveCell(cell);
    if (!resolved.ok()) return ReportError(resolved.status());
    StatusOr<CellResult> result = RunCell(*resolved, run);
    if (!result.ok()) return ReportError(result.status());
    const char* status = StatusName(result->status);
    ++counts[status];
    const std::string judged = result->metrics ? "; judged by " + result->judged_by : "";
    std::fprintf(text, "%-13s %s  %s%s\n", status, cell.Label().c_str(), Summary(*result).c_str(),
                 judged.c_str());
    const size_t fp64_missing = result->observed.find("fp64_error_ratio not measured");  // cell_runner.cc
    if (fp64_missing != std::string::npos)
      std::fprintf(text, "              %s\n", result->observed.substr(fp64_missing).c_str());
    PrintReplays(text, *result);
    if (IsFailure(result->status)) {
      failed = true;
      if (result->producer.attempted())
        std::fprintf(text, "              error made in: %s\n", result->producer.Describe().c_str());
      if (result->status != CellStatus::kNonfinite && result->first_nonfinite.found &&
          !result->failed_fp16_headroom) {
        const std::string absorbed = result->first_nonfinite.Describe();
        std::fprintf(text, "              non-finite on the way, absorbed before the frames: %s\n",
                     absorbed.c_str());
      }
      std::fprintf(text, "              reproduce: %s\n", result->repro.c_str());
    }
    std::fflush(text);
    json_cells.push_back(CellResultToJson(*result));
  }
  std::string line;
  for (const auto& [status, n] : counts)
    line += (line.empty() ? "" : ", ") + std::to_string(n) + " " + status;
  std::fprintf(text, "%zu cell%s: %s\n", cells.size(), cells.size() == 1 ? "" : "s", line.c_str());
  if (!o.json_path.empty()) {
    const Status written = WriteOutputFile(o.json_path, nlohmann::json{{"cells", json_cells}}.dump(2) + "\n");
    if (!written.ok()) return ReportError(written);
  }
  return failed ? kExitFailed : kExitOk;
}

}  // namespace

Command AddCheckCommand(CLI::App& parent) {
  auto o = std::make_shared<CheckOptions>();
  CLI::App* app = parent.add_subcommand(
      "check", "Run and judge cells against their FP32 goldens (exit 0 pass, 1 fail, 2 error)");
  AddPipelineOptions(app, &o->pipeline);
  AddGoldenDirOption(app, &o->golden_dir);
  AddOutputFileOption(app, "--json", &o->json_path, "Write the cells' results as JSON");
  app->add_option("--tolerance", o->tolerance, "Tolerance profile (default: the one named after the policy)");
  app->add_option("--xfail", o->xfail, "Declare the cells expected to fail, with this reason");
  app->add_option("--artifacts", o->artifacts_dir,
                  "Keep each cell's frames.npy and latents.npy under DIR/<cell id>/");
  app->add_flag("--fp64-ref", o->fp64_ref,
                "Also run each cell's config in FP64 on the CPU and report fp64_error_ratio");
  app->add_flag("--ignore-calibration", o->ignore_calibration,
                "Judge by the tolerance profiles, not by the model's calibration beside its golden "
                "(framegate calibrate)");
  app->add_flag("--probes", o->probes,
                "Record each module's range and headroom to overflow (costs ~50% of a tiny "
                "cell; NaN localisation is always on)");
  app->add_option("--repeats", o->repeats, "Timed runs per cell (the first is judged)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app->add_option("--warmup", o->warmup, "Untimed runs before the timed ones")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app->add_option("--replay", o->replay,
                  "Step replay: N passes that run each sampler step from the golden's latents before it "
                  "and compare its output with the golden's after it (instead of free runs)")
      ->check(CLI::PositiveNumber);
  app->add_option("--inject-sdc", o->inject_sdc,
                  "Testing aid: flip bits in op outputs, DEVICE:RATE[:transient|persistent][:BITS] "
                  "(docs/qualification.md); needs --replay");
  AddThreadsOption(app, &o->threads);
  return {app, [o] { return RunCheck(*o); }};
}

}  // namespace framegate
