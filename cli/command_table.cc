#include "cli/command_table.h"

#include <filesystem>

namespace framegate {

const std::vector<PassThroughCommand>& PassThroughCommands() {
  static const std::vector<PassThroughCommand> commands = {
    {"advise",
     "Find the modules to keep in FP32 so that a failing cell passes, proven by "
     "running (exit 0 found, 1 none, 2 bad input)"},
    {"audit", "List weights and module inputs whose dtype does not match the policy (exit 1 if any)"},
    {"calibrate",
     "Measure a model's FP32 noise floor and each policy's error over seeds, kept beside its "
     "goldens: its cells are then judged by them (exit 0 measured, 1 a policy not, 2 error)"},
    {"check", "Run and judge cells against their FP32 goldens (exit 0 pass, 1 fail, 2 error)"},
    {"devices",
     "Show the devices cells can run on: the CPU and its ISA features, its ATen "
     "kernel paths (cpu:avx2, ...), each GPU"},
    {"generate", "Run one pipeline config on one device and write its frames (PNG + frames.npy)"},
    {"golden", "Make, check and list FP32 golden frames"},
    {"info", "Show the build, LibTorch, BLAS, threads and devices"},
    {"qualify",
     "Qualify devices: replay a matrix's cells step by step on each, repeated, and give each "
     "device PASS, DEGRADED or FAULTY with its reasons (exit 0 all PASS, 1 not, 2 error)"},
#if FRAMEGATE_WITH_CUDA
    {"list", kListSummary},
#endif
#if FRAMEGATE_WITH_CUDA
    {"run", kRunSummary},
#endif
    {"run-cell", ""},
  };
  return commands;
}

std::string PipelineExecutablePath() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "framegate-pipeline";
  if (self.filename() == "framegate-pipeline") return self.string();
  return (self.parent_path().parent_path() / "libexec" / "framegate" / "framegate-pipeline").string();
}

}  // namespace framegate
