// framegate calibrate: measures a model's FP32 noise floor and each policy's error over
// several seeds (runners/model_calibration.h) and writes them beside its goldens; `check`
// and `run` then judge the model's cells by them (runners/cell_bound.h). Exit 0 when
// every policy was measured, 1 when one could not be (it stays judged by its profile), 2
// on bad input.
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/command_table.h"
#include "cli/commands.h"
#include "cli/output_file.h"
#include "harness/build_info.h"
#include "runners/model_calibration.h"

namespace framegate {
namespace {

constexpr const char* kDefaultPolicies = "fp32,bf16,fp16-emulated,fp8e4m3-bf16,fp8e5m2-bf16";

struct CalibrateCliOptions {
  PipelineCliOptions pipeline;
  std::string seeds = "0-2";
  std::string golden_dir;
  std::string json_path;
  int threads = 0;
};

// "0-2" -> 0, 1, 2; "0,3,4" -> 0, 3, 4. InvalidInput naming the bad part.
StatusOr<std::vector<uint64_t>> ParseSeeds(const std::string& text) {
  std::vector<uint64_t> seeds;
  std::stringstream parts(text);
  std::string part;
  while (std::getline(parts, part, ',')) {
    const size_t dash = part.find('-');
    char* end = nullptr;
    const unsigned long long first = std::strtoull(part.c_str(), &end, 10);
    unsigned long long last = first;
    const bool ok_first = !part.empty() && std::isdigit(static_cast<unsigned char>(part[0])) &&
                          end == part.c_str() + (dash == std::string::npos ? part.size() : dash);
    bool ok_last = true;
    if (dash != std::string::npos) {
      const std::string tail = part.substr(dash + 1);
      last = std::strtoull(tail.c_str(), &end, 10);
      ok_last = !tail.empty() && std::isdigit(static_cast<unsigned char>(tail[0])) && *end == '\0';
    }
    if (!ok_first || !ok_last || last < first || last - first >= 100)
      return Status::InvalidInput("--seeds: '" + part + "' is not a seed or a range like 0-2 (at most 100)");
    for (unsigned long long s = first; s <= last; ++s) seeds.push_back(s);
  }
  if (seeds.empty()) return Status::InvalidInput("--seeds: no seed given");
  return seeds;
}

nlohmann::json MetricsJson(const std::vector<NamedMetric>& metrics) {
  nlohmann::json j = nlohmann::json::object();
  for (const NamedMetric& m : metrics) j[m.name] = std::isfinite(m.value) ? nlohmann::json(m.value) : nullptr;
  return j;
}

std::string MetricsText(const std::vector<NamedMetric>& metrics) {
  std::string text;
  char buf[64];
  for (const NamedMetric& m : metrics) {
    std::snprintf(buf, sizeof buf, "%s%s=%.6g", text.empty() ? "" : ", ", m.name.c_str(), m.value);
    text += buf;
  }
  return text;
}

int Print(const CalibrationOutcome& out, const std::string& json_path) {
  FILE* text = json_path == "-" ? stderr : stdout;
  const Calibration& c = out.calibration;
  for (const std::string& g : out.goldens_made) std::fprintf(text, "golden made: %s\n", g.c_str());
  std::fprintf(text, "noise floor (%zu FP32 reruns): %s\n", c.noise_runs.size(),
               MetricsText(c.noise_floor).c_str());
  nlohmann::json policies = nlohmann::json::object();
  bool missing = false;
  for (const auto& [name, p] : c.policies) {
    StatusOr<ToleranceProfile> bounds = CalibratedProfile(c, name);
    nlohmann::json bound_json = nlohmann::json::object();
    std::string bound_text;
    if (bounds.ok()) {
      for (const ToleranceBound& b : bounds->bounds) {
        bound_json[b.metric] = b.bound;
        if (b.metric == "min_psnr")
          bound_text = ", judged from now on by min_psnr >= " + std::to_string(b.bound);
      }
    }
    missing |= !p.not_calibrated.empty();
    std::fprintf(text, "%-16s %s%s\n", name.c_str(),
                 p.not_calibrated.empty() ? MetricsText(p.worst).c_str()
                                          : ("not calibrated: " + p.not_calibrated).c_str(),
                 bound_text.c_str());
    policies[name] = {{"seeds", p.seeds},
                      {"worst", MetricsJson(p.worst)},
                      {"bounds", bound_json},
                      {"not_calibrated", p.not_calibrated}};
  }
  for (const std::string& w : out.looser_than_profile)
    std::fprintf(text, "note: the calibration accepts what the profile fails: %s\n", w.c_str());
  std::fprintf(text, "calibration written: %s (%.1f s)\n", out.path.c_str(), out.seconds);
  if (!json_path.empty()) {
    const nlohmann::json j = {
        {"path", out.path},
        {"seconds", out.seconds},
        {"pipeline", c.pipeline},
        {"config", c.config},
        {"multiplier", c.multiplier},
        {"goldens_made", out.goldens_made},
        {"model_sha256", c.model_sha256},
        {"golden_sha256", c.golden_sha256},
        {"noise_floor", {{"runs", c.noise_runs}, {"worst", MetricsJson(c.noise_floor)}}},
        {"policies", policies},
        {"looser_than_profile", out.looser_than_profile}};
    const Status written = WriteOutputFile(json_path, j.dump(2) + "\n");
    if (!written.ok()) return ReportError(written);
  }
  return missing ? kExitFailed : kExitOk;
}

int RunCalibrate(const CalibrateCliOptions& o) {
  const int threads = ConfigureThreads(o.threads);
  StatusOr<std::vector<uint64_t>> seeds = ParseSeeds(o.seeds);
  if (!seeds.ok()) return ReportError(seeds.status());
  const std::vector<Cell> cells = o.pipeline.ToCells();
  if (cells.empty()) return ReportError(Status::InvalidInput("--policy: no policy given"));
  CalibrateOptions options;
  options.config = cells.front();
  for (const Cell& c : cells) {
    options.policies.push_back(c.policy);
    if (!c.policy_file.empty()) options.policy_file = c.policy_file;
  }
  options.seeds = *seeds;
  options.golden_dir = o.golden_dir;
  options.threads = threads;
  options.pipeline_executable = PipelineExecutablePath();
  FILE* text = o.json_path == "-" ? stderr : stdout;
  options.on_progress = [text](const std::string& line) {
    std::fprintf(text, "  %s\n", line.c_str());
    std::fflush(text);
  };
  StatusOr<CalibrationOutcome> out = CalibrateModel(options);
  if (!out.ok()) return ReportError(out.status());
  return Print(*out, o.json_path);
}

}  // namespace

Command AddCalibrateCommand(CLI::App& parent) {
  auto o = std::make_shared<CalibrateCliOptions>();
  o->pipeline.policy = kDefaultPolicies;
  CLI::App* app = parent.add_subcommand("calibrate", "");
  AddPipelineOptions(app, &o->pipeline);
  app->add_option("--seeds", o->seeds, "Seeds each policy is measured on: a list (0,3) or a range (0-2)")
      ->capture_default_str()
      ->excludes("--seed");
  AddGoldenDirOption(app, &o->golden_dir);
  AddOutputFileOption(app, "--json", &o->json_path, "Write the calibration's measurements as JSON");
  AddThreadsOption(app, &o->threads);
  return {app, [o, app] {
            if (app->get_option("--seed")->count() > 0) o->seeds = std::to_string(o->pipeline.seed);
            return RunCalibrate(*o);
          }};
}

}  // namespace framegate
