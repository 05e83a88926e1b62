#include "runners/model_calibration.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "harness/build_info.h"
#include "harness/sha256.h"
#include "matrix/device_discovery.h"
#include "pipelines/dtype_policy.h"
#include "runners/cell_bound.h"
#include "runners/cell_runner.h"
#include "runners/child_process.h"
#include "runners/scratch_folder.h"

namespace framegate {
namespace {

std::string UtcNow() {
  const std::time_t now = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return buf;
}

// The golden config of `cell` rerun by `check` in another process on `device` with
// `threads` threads: its metrics against the golden.
StatusOr<ComparisonMetrics> RerunFp32(const CalibrateOptions& o, Cell cell, const std::string& device,
                                      int threads, const std::string& scratch) {
  cell.device = device;
  StatusOr<CellResult> r = RunCheckProcess(
      o.pipeline_executable, cell,
      {"--golden-dir", o.golden_dir, "--threads", std::to_string(threads), "--ignore-calibration"}, scratch);
  if (!r.ok()) return r.status();
  if (!r->metrics) return Status::Internal("the FP32 rerun on " + device + " has no metrics: " + r->reason);
  return *r->metrics;
}

// The worst step of one step replay of the golden config of `cell` by `check --replay 1`
// in another process on `device` with `threads` threads.
StatusOr<double> ReplayFp32(const CalibrateOptions& o, Cell cell, const std::string& device, int threads,
                            const std::string& scratch) {
  cell.device = device;
  StatusOr<CellResult> r = RunCheckProcess(o.pipeline_executable, cell,
                                           {"--golden-dir", o.golden_dir, "--threads",
                                            std::to_string(threads), "--ignore-calibration", "--replay", "1"},
                                           scratch);
  if (!r.ok()) return r.status();
  if (r->replays.empty()) return Status::Internal("the FP32 step replay on " + device + ": " + r->reason);
  double worst = 0;
  for (double e : r->replays.front().step_rel_l2) worst = std::isnan(e) ? e : std::max(worst, e);
  return worst;
}

// The noise floor: the worst deviation of the FP32 reruns from the golden of seeds[0],
// free runs (the frames' metrics) and step replays (the steps' rel_l2).
Status MeasureNoiseFloor(const CalibrateOptions& o, Calibration* c) {
  StatusOr<std::unique_ptr<ScratchFolder>> scratch = ScratchFolder::Create(TempDirectory());
  if (!scratch.ok()) return scratch.status();
  Cell cell = o.config;
  cell.policy = "fp32";
  cell.seed = o.seeds.front();
  std::vector<std::pair<std::string, int>> runs = {{"cpu", 1}};
  if (o.threads > 1) runs.push_back({"cpu", o.threads});
  for (const DeviceInfo& d : DiscoverDevices()) {
    if (d.device.rfind("cpu:", 0) == 0) runs.push_back({d.device, o.threads});
  }
  bool replay_steps = true;  // false once the golden says it has no steps (version 1)
  for (const auto& [device, threads] : runs) {
    StatusOr<ComparisonMetrics> m = RerunFp32(o, cell, device, threads, (*scratch)->path());
    if (!m.ok()) return m.status();
    KeepWorst(*m, &c->noise_floor);
    if (replay_steps) {
      StatusOr<double> step = ReplayFp32(o, cell, device, threads, (*scratch)->path());
      if (step.ok()) {
        if (std::isnan(c->noise_step_rel_l2) || !(*step <= c->noise_step_rel_l2))
          c->noise_step_rel_l2 = *step;
      } else if (step.status().code() == Status::Code::kInvalidInput) {
        replay_steps = false;
        c->noise_step_rel_l2 = std::numeric_limits<double>::quiet_NaN();
        if (o.on_progress) o.on_progress("noise floor: steps not measured: " + step.status().message());
      } else {
        return step.status();
      }
    }
    c->noise_runs.push_back(device + " threads=" + std::to_string(threads));
    if (o.on_progress) o.on_progress("noise floor: " + c->noise_runs.back() + " done");
  }
  return Status::Ok();
}

// Each policy over each seed, in this process, judged by the profiles (not by a
// calibration): the worst of each metric, or why there is none.
Status MeasurePolicies(const CalibrateOptions& o, CalibrationOutcome* out) {
  CellRunCache cache;
  CellRunOptions run;
  run.golden_dir = o.golden_dir;
  run.use_calibration = false;
  run.cache = &cache;
  for (const std::string& policy : o.policies) {
    PolicyCalibration p;
    p.seeds = o.seeds;
    for (uint64_t seed : o.seeds) {
      Cell cell = o.config;
      cell.policy = policy;
      cell.policy_file = FindPolicy(policy).ok() ? "" : o.policy_file;
      cell.seed = seed;
      StatusOr<ResolvedCell> resolved = ResolveCell(cell);
      if (!resolved.ok()) return resolved.status();
      StatusOr<CellResult> r = RunCell(*resolved, run);
      if (!r.ok()) return r.status();
      const bool measured = r->metrics && (r->status == CellStatus::kPass || r->status == CellStatus::kFail);
      if (!measured) {
        p.not_calibrated =
            std::string(StatusName(r->status)) + " on seed " + std::to_string(seed) + ": " + r->reason;
        p.worst.clear();
        break;
      }
      KeepWorst(*r->metrics, &p.worst);
      if (r->status == CellStatus::kFail)
        out->looser_than_profile.push_back(policy + " seed " + std::to_string(seed) + ": " + r->reason +
                                           " (" + r->judged_by + ")");
    }
    if (o.on_progress)
      o.on_progress("policy " + policy + ": " + (p.not_calibrated.empty() ? "measured" : p.not_calibrated));
    out->calibration.policies[policy] = p;
  }
  return Status::Ok();
}

// The goldens of every seed (made when missing) and their sha256.
Status GoldensOf(const CalibrateOptions& o, CalibrationOutcome* out, GoldenKey* key_of_first) {
  const GoldenStore store(o.golden_dir);
  for (uint64_t seed : o.seeds) {
    Cell cell = o.config;
    cell.policy = "fp32";
    cell.seed = seed;
    StatusOr<ResolvedCell> resolved = ResolveCell(cell);
    if (!resolved.ok()) return resolved.status();
    if (seed == o.seeds.front()) *key_of_first = resolved->golden;
    const std::string path = store.PathFor(resolved->golden);
    if (!std::filesystem::exists(path)) {
      PipelineSpec spec = resolved->spec;
      spec.device = "cpu";
      StatusOr<GoldenStore::Made> made = store.Make(spec, GoldenMakeCommand(spec, o.golden_dir));
      if (!made.ok()) return made.status();
      out->goldens_made.push_back(made->path);
    }
    StatusOr<std::string> sha = Sha256File(path);
    if (!sha.ok()) return sha.status();
    out->calibration.golden_sha256[std::filesystem::path(path).filename().string()] = *sha;
  }
  return Status::Ok();
}

}  // namespace

StatusOr<CalibrationOutcome> CalibrateModel(const CalibrateOptions& o) {
  if (o.seeds.empty() || o.policies.empty())
    return Status::InvalidInput("calibrate needs a seed and a policy");
  const auto start = std::chrono::steady_clock::now();
  CalibrationOutcome out;
  Calibration& c = out.calibration;
  GoldenKey key;
  FG_RETURN_IF_ERROR(GoldensOf(o, &out, &key));
  c.pipeline = key.pipeline;
  c.weights = key.weights;
  c.fault = key.fault;
  c.config = CalibrationConfigOf(key);
  c.framegate_version = StaticBuildInfo().framegate_version;
  c.created_at = UtcNow();
  StatusOr<std::map<std::string, std::string>> model = ModelFileSha256(o.config.model_dir);
  if (!model.ok()) return model.status();
  c.model_sha256 = *model;
  FG_RETURN_IF_ERROR(MeasureNoiseFloor(o, &c));
  FG_RETURN_IF_ERROR(MeasurePolicies(o, &out));
  out.path = CalibrationPathFor(key, o.golden_dir);
  const std::string partial = out.path + ".partial";
  {
    std::ofstream file(partial);
    file << CalibrationToToml(c);
    if (!file.flush()) return Status::IoError(partial + ": cannot write");
  }
  std::error_code ec;
  std::filesystem::rename(partial, out.path, ec);
  if (ec) return Status::IoError(out.path + ": cannot write: " + ec.message());
  c.source = out.path;
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace framegate
