#include "runners/matrix_runner.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "harness/cell_result_json.h"
#include "pipelines/dtype_policy.h"
#include "runners/cell_runner.h"

namespace framegate {
namespace {

using Clock = std::chrono::steady_clock;

struct Attempt {
  Cell cell;              // as the matrix gave it
  std::string policy;     // the policy this attempt runs (differs after a fallback)
  std::string history;    // "fp16-emulated NONFINITE (...) -> " for fallbacks so far
};

struct Running {
  pid_t pid = -1;
  Attempt attempt;
  Clock::time_point started;
  std::string dir;  // cell.json, result.json, stderr.txt
};

std::string LastLine(const std::string& path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line)) {
    if (!line.empty()) last = line;
  }
  return last;
}

// This process's environment, with ATEN_CPU_CAPABILITY=<path> when `device` is a CPU
// kernel path ("cpu:avx2"). Built before fork: the child only calls execve.
std::vector<std::string> KernelPathEnvironment(const std::string& device) {
  // The matrix checked the path ("cpu:avx2"); `framegate run` never spawns a cell its
  // CPU lacks (UNSUPPORTED).
  const std::string path = device.rfind("cpu:", 0) == 0 ? device.substr(4) : "";
  const std::string key = "ATEN_CPU_CAPABILITY=";
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    if (path.empty() || std::string(*e).rfind(key, 0) != 0) env.push_back(*e);
  }
  if (!path.empty()) env.push_back(key + path);
  return env;
}

// fork + exec `framegate run-cell ...` with stdout/stderr to files in `dir`.
StatusOr<pid_t> Spawn(const CellProcessOptions& o, const Attempt& a, const std::string& dir) {
  Cell cell = a.cell;
  cell.policy = a.policy;
  {
    std::ofstream out(dir + "/cell.json");
    out << CellToJson(cell).dump() << "\n";
    if (!out) return Status::IoError(dir + "/cell.json: cannot write");
  }
  std::vector<std::string> args = {o.framegate_binary, "run-cell", "--cell", dir + "/cell.json",
                                   "--result", dir + "/result.json", "--golden-dir", o.cell.golden_dir,
                                   "--threads", std::to_string(o.threads), "--repeats",
                                   std::to_string(o.cell.repeats), "--warmup", std::to_string(o.cell.warmup)};
  if (!o.cell.artifacts_dir.empty()) {
    args.insert(args.end(), {"--artifacts", o.cell.artifacts_dir + "/" + a.cell.Id()});
  }
  if (o.deterministic) args.push_back("--deterministic");
  if (o.cell.fp64_ref) args.push_back("--fp64-ref");
  if (o.cell.probes) args.push_back("--probes");
  std::vector<char*> argv;
  for (std::string& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  // A CPU kernel path is picked by ATen from the environment, once per process.
  std::vector<std::string> env = KernelPathEnvironment(a.cell.device);
  std::vector<char*> envp;
  for (std::string& s : env) envp.push_back(s.data());
  envp.push_back(nullptr);
  const std::string out_path = dir + "/stdout.txt", err_path = dir + "/stderr.txt";
  const pid_t pid = fork();
  if (pid < 0) return Status::IoError(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    setpgid(0, 0);  // its own process group: a timeout kills its children too
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // and it dies with the runner
    if (!freopen(out_path.c_str(), "w", stdout) || !freopen(err_path.c_str(), "w", stderr)) _exit(127);
    execve(argv[0], argv.data(), envp.data());
    std::fprintf(stderr, "framegate: error: cannot run %s: %s\n", argv[0], std::strerror(errno));
    _exit(127);
  }
  return pid;
}

const char* SignalName(int sig) {
  switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGABRT: return "SIGABRT";
    case SIGKILL: return "SIGKILL";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGTERM: return "SIGTERM";
    default: return "signal";
  }
}

}  // namespace

CellResult ResultOfLostProcess(const Cell& cell, bool timed_out, int wait_status,
                               const std::string& last_stderr_line) {
  CellResult r;
  r.cell = cell;
  r.policy_used = cell.policy;
  if (timed_out) {
    r.status = CellStatus::kTimeout;
    r.reason = "no result before the timeout; the process was killed";
  } else {
    r.status = CellStatus::kCrash;
    if (WIFSIGNALED(wait_status)) {
      const int sig = WTERMSIG(wait_status);
      r.reason = std::string("killed by ") + SignalName(sig) + " (" + std::to_string(sig) + ")";
      if (sig == SIGKILL) r.reason += ", possibly the out-of-memory killer";
    } else {
      r.reason = "exited with code " + std::to_string(WEXITSTATUS(wait_status)) + " without a result";
    }
    if (!last_stderr_line.empty()) r.reason += ": " + last_stderr_line;
  }
  r.status = ApplyExpectedFailure(r.status, cell.expected_to_fail());
  return r;
}

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

StatusOr<MatrixRunSummary> RunCellsInProcesses(const std::vector<Cell>& cells,
                                               const CellProcessOptions& o,
                                               const CellStarted& on_started,
                                               const CellFinished& on_finished,
                                               const std::atomic<bool>* stop) {
  // One queue per device, in matrix order; devices run in parallel, one cell each.
  std::map<std::string, std::vector<Attempt>> queues;
  for (const Cell& c : cells) queues[c.device].push_back({c, c.policy, ""});
  std::map<std::string, size_t> next;
  std::map<std::string, Running> running;  // by device
  const std::string scratch = (std::filesystem::temp_directory_path() /
                               ("framegate-run-" + std::to_string(getpid()))).string();
  MatrixRunSummary summary;
  const auto cleanup = [&] { std::filesystem::remove_all(scratch); };

  while (true) {
    if (stop != nullptr && stop->load()) {
      for (auto& [device, r] : running) {
        kill(-r.pid, SIGKILL);
        waitpid(r.pid, nullptr, 0);
      }
      summary.interrupted = true;
      cleanup();
      return summary;
    }
    for (auto& [device, queue] : queues) {
      if (running.count(device) || next[device] >= queue.size()) continue;
      Running r;
      r.attempt = queue[next[device]++];
      r.dir = scratch + "/" + r.attempt.cell.Id() + "-" + r.attempt.policy;
      std::filesystem::create_directories(r.dir);
      StatusOr<pid_t> pid = Spawn(o, r.attempt, r.dir);
      if (!pid.ok()) {
        cleanup();
        return pid.status();
      }
      r.pid = *pid;
      r.started = Clock::now();
      if (on_started && r.attempt.history.empty()) on_started(r.attempt.cell);
      running.emplace(device, std::move(r));
    }
    if (running.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    for (auto it = running.begin(); it != running.end();) {
      Running& r = it->second;
      int wait_status = 0;
      const bool timed_out = std::chrono::duration<double>(Clock::now() - r.started).count() > o.timeout_seconds;
      pid_t done = waitpid(r.pid, &wait_status, WNOHANG);
      if (done == 0 && !timed_out) {
        ++it;
        continue;
      }
      if (done == 0) {  // timed out: kill the whole process group
        kill(-r.pid, SIGKILL);
        waitpid(r.pid, &wait_status, 0);
      }
      Cell ran = r.attempt.cell;
      ran.policy = r.attempt.policy;
      CellResult result;
      StatusOr<CellResult> parsed = Status::NotFound("");
      std::ifstream in(r.dir + "/result.json");
      if (done != 0 && in) {
        nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
        parsed = CellResultFromJson(j);
      }
      if (parsed.ok()) {
        result = *parsed;
      } else if (done != 0 && WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 2) {
        // Bad input the cell cannot be blamed for (a damaged golden, a broken package).
        summary.harness_error = true;
        result.cell = ran;
        result.status = CellStatus::kError;
        result.error_class = "other";
        result.reason = "other: " + LastLine(r.dir + "/stderr.txt");
      } else {
        result = ResultOfLostProcess(ran, done == 0, wait_status, LastLine(r.dir + "/stderr.txt"));
      }
      // The store keeps the matrix's cell; the policy that produced the verdict is policy_used.
      result.cell = r.attempt.cell;
      result.policy_used = r.attempt.policy;
      const bool broken = result.status == CellStatus::kNonfinite || result.status == CellStatus::kBrokenFrames;
      StatusOr<DtypePolicy> policy = FindPolicyIn(r.attempt.policy, r.attempt.cell.policy_file);
      if (o.fallback && broken && policy.ok() && !policy->fallback.empty()) {
        Attempt retry = r.attempt;
        retry.history += r.attempt.policy + " " + StatusName(result.status) + " (" + result.reason + ") -> ";
        retry.policy = policy->fallback;
        auto& queue = queues[it->first];
        queue.insert(queue.begin() + static_cast<long>(next[it->first]), retry);
      } else {
        if (!r.attempt.history.empty()) {
          result.reason = "fallback: " + r.attempt.history + r.attempt.policy + " " +
                          StatusName(result.status) + (result.reason.empty() ? "" : " (" + result.reason + ")");
        }
        result.repro = CheckCommandFor(ran, o.cell.golden_dir);
        ++summary.finished;
        const Status recorded = on_finished(result);
        if (!recorded.ok()) {
          for (auto& [device, other] : running) {
            if (other.pid != r.pid) kill(-other.pid, SIGKILL);
          }
          cleanup();
          return recorded;
        }
      }
      it = running.erase(it);
    }
  }
  cleanup();
  return summary;
}

}  // namespace framegate
