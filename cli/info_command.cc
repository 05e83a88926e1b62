// framegate info: what this build and host are (versions, BLAS, threads, devices).
#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/output_file.h"
#include "harness/build_info.h"
#include "harness/memory_info.h"
#include "pipelines/reference_model.h"

namespace framegate {
namespace {

struct InfoOptions {
  int threads = 0;
  std::string json_path;              // --json FILE ("-": stdout)
  std::vector<std::string> policies;  // report weight bytes under these ("all": every preset)
  std::string size = "tiny";
};

// Stored weight bytes of the reference size under each policy (islands included).
StatusOr<nlohmann::json> PolicyWeightBytes(const InfoOptions& options) {
  StatusOr<ReferenceSize> size = FindReferenceSize(options.size);
  if (!size.ok()) return size.status();
  std::vector<DtypePolicy> policies;
  for (const std::string& name : options.policies) {
    if (name == "all") {
      policies.insert(policies.end(), PresetPolicies().begin(), PresetPolicies().end());
      continue;
    }
    StatusOr<DtypePolicy> p = FindPolicy(name);
    if (!p.ok()) return p.status();
    policies.push_back(*p);
  }
  nlohmann::json rows = nlohmann::json::array();
  StatusOr<std::unique_ptr<ReferenceModel>> fp32 =
      ReferenceModel::Create(*size, Fp32Policy(), c10::Device("cpu"));
  if (!fp32.ok()) return fp32.status();
  const int64_t fp32_bytes = (*fp32)->weights().StoredBytes();
  for (const DtypePolicy& policy : policies) {
    StatusOr<std::unique_ptr<ReferenceModel>> m = ReferenceModel::Create(*size, policy, c10::Device("cpu"));
    if (!m.ok()) return m.status();
    const int64_t bytes = (*m)->weights().StoredBytes();
    rows.push_back({{"policy", policy.name},
                    {"size", size->name},
                    {"parameters", (*m)->weights().NumParameters()},
                    {"weight_bytes", bytes},
                    {"ratio_to_fp32", double(bytes) / double(fp32_bytes)}});
  }
  return rows;
}

int RunInfoCommand(const InfoOptions& options) {
  ConfigureThreads(options.threads);
  const BuildInfo build = CollectBuildInfo();
  const CpuInfo cpu = DetectCpu();
  nlohmann::json j = {
      {"framegate", build.framegate_version},
      {"git_sha", build.git_sha},
      {"compiler", build.compiler},
      {"libtorch", build.libtorch_version},
      {"libtorch_cuda", build.libtorch_has_cuda},
      {"blas", build.blas},
      {"threads", build.threads},
      {"devices",
       {{{"device", "cpu"},
         {"model", cpu.model},
         {"cores", cpu.logical_cores},
         {"features", cpu.features},
         {"memory_available", AvailableDeviceBytes(c10::Device("cpu"))}}}},
  };
  if (!options.policies.empty()) {
    StatusOr<nlohmann::json> rows = PolicyWeightBytes(options);
    if (!rows.ok()) return ReportError(rows.status());
    j["policies"] = *rows;
  }
  if (!options.json_path.empty()) {
    const Status written = WriteOutputFile(options.json_path, j.dump(2) + "\n");
    if (!written.ok()) return ReportError(written);
    if (options.json_path == "-") return kExitOk;
  }
  std::cout << "framegate " << build.framegate_version << " (" << build.git_sha << ", " << build.compiler
            << ")\n"
            << "LibTorch  " << build.libtorch_version << (build.libtorch_has_cuda ? " (CUDA)" : " (CPU only)")
            << "\n"
            << "BLAS      " << build.blas << "\n"
            << "threads   " << build.threads << "\n"
            << "devices:\n"
            << "  cpu     " << cpu.model << ", " << cpu.logical_cores << " cores, "
            << FormatBytes(AvailableDeviceBytes(c10::Device("cpu"))) << " available, features:";
  for (const std::string& f : cpu.features) std::cout << " " << f;
  std::cout << "\n";
  if (!build.libtorch_has_cuda) std::cout << "  cuda    none (this LibTorch has no CUDA)\n";
  if (j.contains("policies")) {
    std::cout << "weights of reference:" << options.size << " per policy:\n";
    for (const auto& row : j["policies"]) {
      std::printf("  %-20s %12lld bytes  %5.3f x fp32\n", row["policy"].get<std::string>().c_str(),
                  static_cast<long long>(row["weight_bytes"].get<int64_t>()),
                  row["ratio_to_fp32"].get<double>());
    }
  }
  return kExitOk;
}

}  // namespace

Command AddInfoCommand(CLI::App& parent) {
  auto options = std::make_shared<InfoOptions>();
  CLI::App* app = parent.add_subcommand("info", "Show the build, LibTorch, BLAS, threads and devices");
  AddThreadsOption(app, &options->threads);
  AddOutputFileOption(app, "--json", &options->json_path, "Write the facts as JSON");
  app->add_option("--policy", options->policies,
                  "Report the stored weight bytes under these policies ('all': every preset)");
  app->add_option("--size", options->size, "Reference size for --policy")->capture_default_str();
  return {app, [options] { return RunInfoCommand(*options); }};
}

}  // namespace framegate
