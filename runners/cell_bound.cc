#include "runners/cell_bound.h"

#include <cctype>
#include <filesystem>
#include <set>
#include <sstream>

#include "harness/sha256.h"
#include "harness/shell_quote.h"

namespace framegate {
namespace {

std::string PathSafe(const std::string& text) {
  std::string out;
  for (char c : text) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '-';
  return out;
}

// Why `c` does not describe the model and golden being judged; "" when it does.
std::string StaleReason(const Calibration& c, const ResolvedCell& cell, const std::string& golden_path) {
  const GoldenKey& key = cell.golden;
  if (c.pipeline != key.pipeline || c.fault != key.fault || c.config != CalibrationConfigOf(key))
    return "it is for " + c.pipeline + " " + c.config;
  if (c.weights != key.weights)
    return "the model's modules changed (" + c.weights + ", now " + key.weights + ")";
  if (!cell.cell.model_dir.empty()) {
    const auto recorded = c.model_sha256.find("model.toml");
    StatusOr<std::string> now = Sha256File(cell.cell.model_dir + "/model.toml");
    if (recorded == c.model_sha256.end() || !now.ok() || *now != recorded->second)
      return "model.toml changed";
  }
  if (!golden_path.empty()) {
    const std::string file = std::filesystem::path(golden_path).filename().string();
    const auto recorded = c.golden_sha256.find(file);
    if (recorded != c.golden_sha256.end()) {
      StatusOr<std::string> now = Sha256File(golden_path);
      if (!now.ok() || *now != recorded->second) return "the golden " + file + " changed";
    }
  }
  return "";
}

// `profile` judging alone: no compute part, step budget or sensitive-model profile.
JudgingBound BoundOf(ToleranceProfile profile, std::string judged_by) {
  JudgingBound bound;
  bound.profile = std::move(profile);
  bound.judged_by = std::move(judged_by);
  return bound;
}

}  // namespace

std::string CalibrationConfigOf(const GoldenKey& key) {
  std::ostringstream out;
  out << "sampler=" << SamplerKindName(key.sampler.kind) << "|steps=" << key.sampler.steps
      << "|guidance=" << key.sampler.guidance;
  return out.str();
}

std::string CalibrationPathFor(const GoldenKey& key, const std::string& golden_dir) {
  const std::string canonical =
      "calibration-v1|pipeline=" + key.pipeline + "|fault=" + key.fault + "|" + CalibrationConfigOf(key);
  return golden_dir + "/calibration-" + PathSafe(key.pipeline) +
         (key.fault.empty() ? "" : "-" + PathSafe(key.fault)) + "-" + Sha256Hex(canonical).substr(0, 8) +
         ".toml";
}

StatusOr<std::map<std::string, std::string>> ModelFileSha256(const std::string& model_dir) {
  std::map<std::string, std::string> shas;
  if (model_dir.empty()) return shas;
  for (const char* file : {"denoiser.pt", "decoder.pt", "model.toml"}) {
    StatusOr<std::string> sha = Sha256File(model_dir + "/" + file);
    if (!sha.ok()) return sha.status();
    shas[file] = *sha;
  }
  return shas;
}

StatusOr<std::optional<ComputePartBound>> ComputePartBoundOf(const DtypePolicy& policy) {
  const bool fp8 = policy.storage == WeightStorage::kFp8E4M3 || policy.storage == WeightStorage::kFp8E5M2;
  const bool reduced = policy.compute == c10::kBFloat16 || policy.compute == c10::kHalf;
  if (!fp8 || !reduced || policy.emulate_fp16) return std::optional<ComputePartBound>();
  ComputePartBound part;
  part.reference = policy;
  part.reference.name = policy.name + ".fp32-compute";
  part.reference.compute = c10::kFloat;
  part.reference.allow_tf32 = false;
  part.reference.fp16_reduced_precision_reduction = false;
  part.reference.bf16_reduced_precision_reduction = false;
  part.reference.fallback.clear();
  // The same policy with FP32 weights: judged by its compute dtype's preset (FP32
  // weights under bf16 compute count as bf16 storage, DtypePolicy::ToleranceProfileName).
  DtypePolicy compute_only = policy;
  compute_only.name.clear();
  compute_only.based_on.clear();
  compute_only.tolerance.clear();
  compute_only.storage = WeightStorage::kFloat32;
  const std::string name = compute_only.ToleranceProfileName();
  if (name.empty()) return std::optional<ComputePartBound>();  // no preset computes so
  StatusOr<ToleranceProfile> profile = FindToleranceProfile(name);
  if (!profile.ok()) return profile.status();
  part.profile = *profile;
  part.reference_text = std::string("its ") + WeightStorageName(policy.storage) + " weights computed in FP32";
  part.judged_by = "profile " + name + " against " + part.reference_text;
  return std::optional<ComputePartBound>(std::move(part));
}

std::string CalibrateAgainCommand(const Calibration& calibration, const ResolvedCell& cell,
                                  const std::string& golden_dir) {
  std::vector<std::string> words = {"framegate", "calibrate"};
  const std::vector<std::string> config = ConfigArguments(cell.spec);
  words.insert(words.end(), config.begin(), config.end());
  std::set<std::string> names = {cell.cell.policy};
  std::set<uint64_t> seeds;
  for (const auto& [name, p] : calibration.policies) {
    names.insert(name);
    seeds.insert(p.seeds.begin(), p.seeds.end());
  }
  std::string policies =
      names.count(Fp32Policy().name) ? Fp32Policy().name : "";  // first, as calibrate runs it
  for (const std::string& name : names) {
    if (name != Fp32Policy().name) policies += (policies.empty() ? "" : ",") + name;
  }
  words.insert(words.end(), {"--policy", policies});
  if (!cell.cell.policy_file.empty()) words.insert(words.end(), {"--policy-file", cell.cell.policy_file});
  std::string seed_list;
  for (uint64_t seed : seeds) seed_list += (seed_list.empty() ? "" : ",") + std::to_string(seed);
  if (!seed_list.empty()) words.insert(words.end(), {"--seeds", seed_list});
  words.insert(words.end(), {"--golden-dir", golden_dir});
  return ShellCommand(words);
}

StatusOr<JudgingBound> JudgingBoundOf(const ResolvedCell& cell, const std::string& golden_dir,
                                      const std::string& golden_path, bool use_calibration) {
  const std::string& policy = cell.cell.policy;
  const std::string profile_name = cell.tolerance.name;
  if (!cell.cell.tolerance.empty() || !cell.spec.policy.tolerance.empty())
    return BoundOf(cell.tolerance, "profile " + profile_name + " (explicit)");
  if (!cell.cell.model_dir.empty()) {
    StatusOr<ToleranceProfile> own = ModelTomlProfile(cell.cell.model_dir + "/model.toml", policy);
    if (own.ok()) return BoundOf(*own, own->name);
    if (own.status().code() != Status::Code::kNotFound) return own.status();
  }
  JudgingBound fallback = BoundOf(cell.tolerance, "profile " + profile_name);
  StatusOr<std::optional<ComputePartBound>> compute_part = ComputePartBoundOf(cell.spec.policy);
  if (!compute_part.ok()) return compute_part.status();
  fallback.compute_part = std::move(*compute_part);
  if (cell.spec.policy.name != Fp32Policy().name) {
    fallback.sensitive_model = AllowingErrorTimes(cell.tolerance, kSensitiveModelErrorFactor);
    if (fallback.compute_part) {
      fallback.compute_part->sensitive_model =
          AllowingErrorTimes(fallback.compute_part->profile, kSensitiveModelErrorFactor);
    }
  }
  if (!use_calibration) return fallback;
  const std::string path = CalibrationPathFor(cell.golden, golden_dir);
  StatusOr<Calibration> calibration = ReadCalibrationFile(path);
  if (calibration.status().code() == Status::Code::kNotFound) return fallback;
  if (!calibration.ok()) return calibration.status();
  const std::string stale = StaleReason(*calibration, cell, golden_path);
  if (!stale.empty()) {
    fallback.judged_by += " (calibration " + path + " is stale: " + stale + "; run " +
                          CalibrateAgainCommand(*calibration, cell, golden_dir) + " again)";
    return fallback;
  }
  if (cell.spec.policy.name == Fp32Policy().name)
    fallback.step_budget = StepBudget(*calibration, cell.cell.device);
  StatusOr<ToleranceProfile> calibrated = CalibratedProfile(*calibration, policy);
  if (!calibrated.ok()) {  // run again with the policy when it was not asked for
    const bool absent = calibration->policies.count(policy) == 0;
    fallback.judged_by += " (calibration " + path + ": " + calibrated.status().message() +
                          (absent ? "; run " + CalibrateAgainCommand(*calibration, cell, golden_dir) : "") +
                          ")";
    return fallback;
  }
  const auto denoiser = calibration->model_sha256.find("denoiser.pt");
  const std::string model = denoiser != calibration->model_sha256.end()
                                ? "model sha256 " + denoiser->second.substr(0, 16)
                                : "model " + calibration->weights;
  JudgingBound calibrated_bound = BoundOf(*calibrated, "calibration " + path + " (" + model + ")");
  calibrated_bound.step_budget = fallback.step_budget;
  return calibrated_bound;
}

}  // namespace framegate
