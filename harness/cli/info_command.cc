// framegate info: what this build and host are (versions, BLAS, threads, devices).
#include <iostream>

#include <nlohmann/json.hpp>

#include "harness/build_info.h"
#include "harness/cli/commands.h"
#include "harness/memory_info.h"

namespace framegate {
namespace {

struct InfoOptions {
  int threads = 0;
  bool json = false;
};

int RunInfo(const InfoOptions& options) {
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
  if (options.json) {
    std::cout << j.dump(2) << "\n";
    return kExitOk;
  }
  std::cout << "framegate " << build.framegate_version << " (" << build.git_sha << ", "
            << build.compiler << ")\n"
            << "LibTorch  " << build.libtorch_version
            << (build.libtorch_has_cuda ? " (CUDA)" : " (CPU only)") << "\n"
            << "BLAS      " << build.blas << "\n"
            << "threads   " << build.threads << "\n"
            << "devices:\n"
            << "  cpu     " << cpu.model << ", " << cpu.logical_cores << " cores, "
            << FormatBytes(AvailableDeviceBytes(c10::Device("cpu"))) << " available, features:";
  for (const std::string& f : cpu.features) std::cout << " " << f;
  std::cout << "\n";
  if (!build.libtorch_has_cuda) std::cout << "  cuda    none (this LibTorch has no CUDA)\n";
  return kExitOk;
}

}  // namespace

Command AddInfoCommand(CLI::App& parent) {
  auto options = std::make_shared<InfoOptions>();
  CLI::App* app = parent.add_subcommand("info", "Show the build, LibTorch, BLAS, threads and devices");
  AddThreadsOption(app, &options->threads);
  app->add_flag("--json", options->json, "Print as JSON");
  return {app, [options] { return RunInfo(*options); }};
}

}  // namespace framegate
