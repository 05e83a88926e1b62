#include "runners/cell_worker.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "harness/build_info.h"
#include "harness/cell_result_json.h"
#include "runners/cell_slot.h"

namespace framegate {
namespace {

// LibTorch's global switches a cell may change, as they were when the process started.
struct GlobalSwitches {
  bool deterministic = false;
  bool deterministic_warn_only = false;
  bool tf32_cublas = false;
  bool tf32_cudnn = false;
  bool fp16_reduction_cublas = false;
  bool cudnn_benchmark = false;
  bool cudnn_deterministic = false;

  static GlobalSwitches Current() {
    at::Context& c = at::globalContext();
    GlobalSwitches s;
    s.deterministic = c.deterministicAlgorithms();
    s.deterministic_warn_only = c.deterministicAlgorithmsWarnOnly();
    s.tf32_cublas = c.allowTF32CuBLAS();
    s.tf32_cudnn = c.allowTF32CuDNN();
    s.fp16_reduction_cublas = c.allowFP16ReductionCuBLAS();
    s.cudnn_benchmark = c.benchmarkCuDNN();
    s.cudnn_deterministic = c.deterministicCuDNN();
    return s;
  }
  void Apply() const {
    at::Context& c = at::globalContext();
    c.setDeterministicAlgorithms(deterministic, deterministic_warn_only);
    c.setAllowTF32CuBLAS(tf32_cublas);
    c.setAllowTF32CuDNN(tf32_cudnn);
    c.setAllowFP16ReductionCuBLAS(fp16_reduction_cublas);
    c.setBenchmarkCuDNN(cudnn_benchmark);
    c.setDeterministicCuDNN(cudnn_deterministic);
  }
};

const GlobalSwitches& StartupSwitches() {
  static const GlobalSwitches startup = GlobalSwitches::Current();
  return startup;
}

int ReportBadInput(const Status& status) {
  std::cerr << "framegate: error: " << status.message() << std::endl;
  return 2;
}

// Points fd `target` at `path` (created or truncated).
bool RedirectTo(int target, const std::string& path) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  const bool ok = dup2(fd, target) >= 0;
  close(fd);
  return ok;
}

}  // namespace

void TEST_InjectCellFault(const Cell& cell) {
  const char* spec = std::getenv("FRAMEGATE_TEST_CELL_FAULTS");
  if (spec == nullptr) return;
  std::stringstream items(spec);
  std::string item;
  while (std::getline(items, item, ',')) {
    const size_t colon = item.find(':');
    if (colon == std::string::npos || item.substr(0, colon) != cell.policy) continue;
    const std::string what = item.substr(colon + 1);
    if (what == "segv") std::raise(SIGSEGV);
    if (what == "abort") std::abort();
    if (what == "hang") {
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    }
  }
}

void PrepareProcessForCell(const Cell& cell, const CellProcessSettings& settings) {
  StartupSwitches();  // captured before the first cell changes anything
  TEST_InjectCellFault(cell);
  ConfigureThreads(settings.threads);
  GlobalSwitches switches = StartupSwitches();
  if (settings.deterministic) {
    switches.deterministic = true;
    switches.deterministic_warn_only = false;
    switches.tf32_cublas = switches.tf32_cudnn = false;
  }
  switches.Apply();
  // The sampler's noise has its own generators; an op that draws from the default one
  // (dropout left on in a package) draws the same numbers in every process. Not done yet:
  // a CUDA build's device generators are not reset, so a cell that draws from one moves
  // it for the next cell in the worker.
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  generator.set_current_seed(c10::default_rng_seed_val);
  // The peak RSS a result records is this cell's: reset the kernel's high-water mark.
  std::ofstream("/proc/self/clear_refs") << "5";
}

int RunCellFile(const std::string& cell_path, const std::string& result_path,
                const std::string& artifacts_dir, const CellProcessSettings& settings, CellRunCache* cache) {
  std::ifstream in(cell_path);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  StatusOr<Cell> cell = CellFromJson(j);
  if (!cell.ok()) return ReportBadInput(cell.status().WithContext(cell_path));
  PrepareProcessForCell(*cell, settings);
  CellRunOptions options = settings.run;
  options.artifacts_dir = artifacts_dir;
  options.cache = cache;
  StatusOr<ResolvedCell> resolved = ResolveCell(*cell);
  if (!resolved.ok()) return ReportBadInput(resolved.status());
  StatusOr<CellResult> result = RunCell(*resolved, options);
  if (!result.ok()) return ReportBadInput(result.status());
  static const std::string blas = CollectBuildInfo().blas;
  nlohmann::json json = CellResultToJson(*result);
  json[kProcessBlasKey] = blas;
  const std::string tmp = result_path + ".tmp";
  {
    std::ofstream out(tmp);
    out << json.dump() << "\n";
    if (!out) return ReportBadInput(Status::IoError(tmp + ": cannot write"));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, result_path, ec);
  if (ec) return ReportBadInput(Status::IoError(result_path + ": cannot write: " + ec.message()));
  return 0;
}

void TEST_ExitWorkerAtRequest(int request) {
  const char* at = std::getenv("FRAMEGATE_TEST_WORKER_EXIT_AT_REQUEST");
  if (at == nullptr || std::atoi(at) != request) return;
  std::fprintf(stderr, "framegate: test hook: the worker exits at its request %d\n", request);
  std::fflush(stderr);
  std::_Exit(3);
}

int ServeCells(const CellProcessSettings& settings) {
  // Replies go to the stdout the worker started with; each cell's own output goes to
  // files in its folder.
  const int reply_fd = dup(STDOUT_FILENO);
  if (reply_fd < 0) return ReportBadInput(Status::IoError("run-cell --worker: cannot keep stdout"));
  FILE* replies = fdopen(reply_fd, "w");
  if (replies == nullptr) return ReportBadInput(Status::IoError("run-cell --worker: cannot keep stdout"));
  CellRunCache cache;
  std::string line;
  for (int requests = 1; std::getline(std::cin, line); ++requests) {
    TEST_ExitWorkerAtRequest(requests);
    // Taken: from here on, the worker's end is the cell's.
    std::fprintf(replies, "%s\n", kWorkerTookCell);
    std::fflush(replies);
    const nlohmann::json request = nlohmann::json::parse(line, nullptr, false);
    if (!request.is_object() || !request.contains("dir") || !request["dir"].is_string()) {
      return ReportBadInput(Status::InvalidInput("run-cell --worker: bad request line: " + line));
    }
    const std::string dir = request["dir"].get<std::string>();
    const std::string artifacts = request.value("artifacts", "");
    std::fflush(stdout);
    std::cerr.flush();
    if (!RedirectTo(STDOUT_FILENO, dir + "/stdout.txt") || !RedirectTo(STDERR_FILENO, dir + "/stderr.txt")) {
      return ReportBadInput(Status::IoError(dir + ": cannot write the cell's output files"));
    }
    const int code = RunCellFile(dir + "/cell.json", dir + "/result.json", artifacts, settings, &cache);
    std::fflush(stdout);
    std::cerr.flush();
    std::fprintf(replies, "%d\n", code);
    std::fflush(replies);
  }
  std::fclose(replies);
  return 0;
}

}  // namespace framegate
