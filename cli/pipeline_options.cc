// The options every command that runs a pipeline shares, parsed in one place.
#include "cli/pipeline_options.h"
#include "pipelines/dtype_policy.h"
#include "pipelines/fault_cases.h"
#include "pipelines/pipeline_config.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "matrix/device_discovery.h"
#include "matrix/unsupported.h"

namespace framegate {

namespace {

// The names --help lists, from the data that defines them.
std::string PresetNames() {
  std::string names;
  for (const DtypePolicy& p : PresetPolicies()) names += (names.empty() ? "" : ", ") + p.name;
  return names;
}
std::string FaultNames() {
  std::string names;
  for (const FaultCaseInfo& f : FaultCases()) {
    names += (names.empty() ? "" : ", ") + std::string(f.name) + " (" + f.field_report + ")";
  }
  return names;
}

}  // namespace

namespace {

// What a limit asks for, without its name: "an integer from 1 to 10000".
template <typename Limit>
std::string WhatLimitAsks(const Limit& limit) {
  const std::string text = LimitText(limit);
  const std::string head = std::string(limit.name) + " must be ";
  return text.substr(head.size());
}

}  // namespace

CLI::Validator Within(const IntegerLimit& limit) {
  return CLI::Validator([limit](std::string& text) { return ParseNumber(limit, text).status().message(); },
                        WhatLimitAsks(limit));
}

CLI::Validator Within(const RealLimit& limit) {
  return CLI::Validator([limit](std::string& text) { return ParseNumber(limit, text).status().message(); },
                        WhatLimitAsks(limit));
}

void AddPipelineOptions(CLI::App* app, PipelineCliOptions* o) {
  auto* size = app->add_option("--size", o->size, "Reference pipeline size: tiny, small, large")
                   ->capture_default_str();
  app->add_option("--model", o->model_dir, "A TorchScript model package folder instead of --size")
      ->check(CLI::ExistingDirectory)
      ->excludes(size);
  app->add_option("--policy", o->policy,
                  "Dtype policy (check: a comma-separated list): a preset (" + PresetNames() +
                      ") or one --policy-file defines")
      ->capture_default_str();
  app->add_option("--policy-file", o->policy_file,
                  "TOML file whose [policy.NAME] tables define more policies (a matrix file, "
                  "or what `framegate advise` printed)")
      ->check(CLI::ExistingFile);
  app->add_option("--device", o->device,
                  "Device: cpu, cpu:avx512|avx2|default (an ATen CPU kernel path) or cuda:N")
      ->capture_default_str();
  app->add_option("--seed", o->seed, "Seed of the initial noise and conditioning")
      ->check(Within(kSeedLimit))
      ->capture_default_str();
  app->add_option("--weight-seed", o->weight_seed, "Seed of the reference model's weights")
      ->check(Within(kWeightSeedLimit))
      ->capture_default_str();
  app->add_option("--fault", o->fault, "Fault case to build into the reference model: " + FaultNames());
  app->add_option("--steps", o->steps, "Sampler steps (default: the size's or the package's)")
      ->check(Within(kStepsLimit));
  app->add_option("--sampler", o->sampler, "Sampler: ddim or euler (default: the size's)")
      ->check(CLI::IsMember({"ddim", "euler"}));
  app->add_option("--guidance", o->guidance, "Classifier-free guidance scale (1 to 100)")
      ->check(Within(kGuidanceLimit));
}

std::vector<Cell> PipelineCliOptions::ToCells() const {
  std::vector<Cell> cells;
  std::stringstream policies(policy);
  std::string name;
  while (std::getline(policies, name, ',')) {
    if (name.empty()) continue;
    Cell cell;
    cell.size = size;
    cell.model_dir = model_dir;
    cell.device = device;
    cell.policy = name;
    if (!policy_file.empty() && !FindPolicy(name).ok()) {
      cell.policy_file = std::filesystem::absolute(policy_file).lexically_normal().string();
    }
    cell.seed = seed;
    cell.fault = fault == "none" ? "" : fault;
    cell.sampler = sampler;
    cell.steps = steps;
    cell.guidance = guidance;
    cells.push_back(cell);
  }
  return cells;
}

}  // namespace framegate

namespace framegate {

Status ExecForCpuKernelPath(const std::string& device, char** argv) {
  if (device == "cpu:*" ||
      (device.find(',') != std::string::npos && device.find("cpu:") != std::string::npos)) {
    return Status::InvalidInput("--device " + device +
                                ": one process runs one CPU kernel path "
                                "(ATEN_CPU_CAPABILITY); use `framegate run` or one --device per check");
  }
  const std::string path = CpuKernelPathOf(device);
  if (path.empty()) return Status::Ok();
  const char* env = std::getenv("ATEN_CPU_CAPABILITY");
  if (env != nullptr && path == env) return Status::Ok();
  Cell cell;
  cell.device = device;
  const StatusOr<std::string> unsupported = UnsupportedReason(cell, DiscoverDevices());
  if (!unsupported.ok()) return unsupported.status();
  if (!unsupported->empty()) return Status::Unsupported(unsupported.value());
  if (setenv("ATEN_CPU_CAPABILITY", path.c_str(), 1) == 0) execv("/proc/self/exe", argv);
  return Status::IoError("cannot re-execute with ATEN_CPU_CAPABILITY=" + path + ": " +
                         std::strerror(errno));  // execv returns only when it failed
}

}  // namespace framegate
