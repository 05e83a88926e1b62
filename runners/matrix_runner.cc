#include "runners/matrix_runner.h"

#include <fcntl.h>
#include <poll.h>
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
#include <memory>
#include <thread>

#include <nlohmann/json.hpp>

#include "checks/verdict.h"
#include "harness/cell_result_json.h"
#include "matrix/device_discovery.h"
#include "pipelines/dtype_policy.h"

namespace framegate {
namespace {

using Clock = std::chrono::steady_clock;

struct Attempt {
  Cell cell;            // as the matrix gave it
  std::string policy;   // the policy this attempt runs (differs after a fallback)
  std::string history;  // "fp16-emulated NONFINITE (...) -> " for fallbacks so far
};

struct Running {
  Attempt attempt;
  std::string dir;  // cell.json, result.json, stdout.txt, stderr.txt
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
  const std::string path = CpuKernelPathOf(device);
  const std::string key = "ATEN_CPU_CAPABILITY=";
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    if (path.empty() || std::string(*e).rfind(key, 0) != 0) env.push_back(*e);
  }
  if (!path.empty()) env.push_back(key + path);
  return env;
}

// The arguments every cell process of the run gets (run-cell and run-cell --worker alike).
std::vector<std::string> SettingsArgs(const CellProcessSettings& s) {
  std::vector<std::string> args = {"--golden-dir", s.run.golden_dir,
                                   "--threads",    std::to_string(s.threads),
                                   "--repeats",    std::to_string(s.run.repeats),
                                   "--warmup",     std::to_string(s.run.warmup)};
  if (s.deterministic) args.push_back("--deterministic");
  if (s.run.fp64_ref) args.push_back("--fp64-ref");
  if (s.run.probes) args.push_back("--probes");
  return args;
}

// fork + execve `args` in its own process group (a timeout kills its children too),
// dying with the runner, with stdin/stdout/stderr on the given descriptors. The
// environment is this process's, with the kernel path of `device`.
StatusOr<pid_t> Spawn(std::vector<std::string> args, const std::string& device, int in_fd, int out_fd,
                      int err_fd) {
  std::vector<char*> argv;
  for (std::string& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::vector<std::string> env = KernelPathEnvironment(device);
  std::vector<char*> envp;
  for (std::string& s : env) envp.push_back(s.data());
  envp.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return Status::IoError(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    signal(SIGPIPE, SIG_DFL);  // the runner ignores it (RunCells); exec would keep that
    if (dup2(in_fd, STDIN_FILENO) < 0 || dup2(out_fd, STDOUT_FILENO) < 0 || dup2(err_fd, STDERR_FILENO) < 0) {
      _exit(127);
    }
    execve(argv[0], argv.data(), envp.data());
    std::fprintf(stderr, "framegate: error: cannot run %s: %s\n", argv[0], std::strerror(errno));
    _exit(127);
  }
  return pid;
}

// A file opened for writing, closed on exec (the child gets it through dup2).
struct OutputFile {
  int fd = -1;
  explicit OutputFile(const std::string& path)
      : fd(open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) {}
  ~OutputFile() {
    if (fd >= 0) close(fd);
  }
};

// How a cell attempt ended, in waitpid's terms: a worker's reply "N" reads as exit code N.
struct AttemptEnd {
  bool timed_out = false;
  int wait_status = 0;
  std::string log;  // where the last stderr line comes from when the cell's own is empty
};

// Kills `pid`'s process group and reaps it; the wait status.
int KillAndReap(pid_t pid) {
  kill(-pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

// One device's way of running its cells, one at a time.
class CellSlot {
 public:
  virtual ~CellSlot() = default;
  // Starts the cell whose cell.json is in `dir`; its output files go there too.
  virtual Status Start(const std::string& dir, const std::string& artifacts) = 0;
  // The attempt's end once it ended or ran past the timeout (its process is then
  // killed); nullopt while it runs.
  virtual std::optional<AttemptEnd> Poll() = 0;
  // A descriptor that becomes readable when the attempt ends; -1 when there is none.
  virtual int WakeFd() const { return -1; }
  virtual void Kill() = 0;  // the run was interrupted
  int processes_started() const { return processes_started_; }

 protected:
  int processes_started_ = 0;
};

bool PastTimeout(Clock::time_point started, double timeout_seconds) {
  return std::chrono::duration<double>(Clock::now() - started).count() > timeout_seconds;
}

// A `framegate run-cell` process per cell.
class ProcessSlot : public CellSlot {
 public:
  ProcessSlot(const CellProcessOptions& o, std::string device) : o_(o), device_(std::move(device)) {}
  ~ProcessSlot() override {
    if (pid_ > 0) KillAndReap(pid_);
  }
  Status Start(const std::string& dir, const std::string& artifacts) override {
    std::vector<std::string> args = {o_.framegate_binary, "run-cell", "--cell",
                                     dir + "/cell.json",  "--result", dir + "/result.json"};
    for (std::string& a : SettingsArgs(o_.settings)) args.push_back(std::move(a));
    if (!artifacts.empty()) args.insert(args.end(), {"--artifacts", artifacts});
    const OutputFile out(dir + "/stdout.txt"), err(dir + "/stderr.txt");
    if (out.fd < 0 || err.fd < 0) return Status::IoError(dir + ": cannot create the cell's output files");
    StatusOr<pid_t> pid = Spawn(args, device_, STDIN_FILENO, out.fd, err.fd);
    if (!pid.ok()) return pid.status();
    pid_ = *pid;
    started_ = Clock::now();
    ++processes_started_;
    return Status::Ok();
  }
  std::optional<AttemptEnd> Poll() override {
    AttemptEnd end;
    const pid_t done = waitpid(pid_, &end.wait_status, WNOHANG);
    if (done == 0) {
      if (!PastTimeout(started_, o_.timeout_seconds)) return std::nullopt;
      end.timed_out = true;
      end.wait_status = KillAndReap(pid_);
    }
    pid_ = -1;
    return end;
  }
  void Kill() override {
    if (pid_ > 0) KillAndReap(pid_);
    pid_ = -1;
  }

 private:
  const CellProcessOptions& o_;
  const std::string device_;
  pid_t pid_ = -1;
  Clock::time_point started_;
};

// Resident memory of process `pid` in bytes (0 when unknown).
int64_t ResidentBytes(pid_t pid) {
  std::ifstream statm("/proc/" + std::to_string(pid) + "/statm");
  int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

// A persistent `framegate run-cell --worker` (protocol in runners/cell_worker.h), started for
// the first cell and again after a crash, a timeout or a recycle.
class WorkerSlot : public CellSlot {
 public:
  WorkerSlot(const CellProcessOptions& o, std::string device, std::string scratch)
      : o_(o), device_(std::move(device)), scratch_(std::move(scratch)) {}
  ~WorkerSlot() override { Retire(); }

  Status Start(const std::string& dir, const std::string& artifacts) override {
    if (pid_ < 0) FG_RETURN_IF_ERROR(StartWorker());
    const std::string request = nlohmann::json{{"dir", dir}, {"artifacts", artifacts}}.dump() + "\n";
    // A worker that died since its last reply shows as EOF on the replies (Poll).
    if (write(request_fd_, request.data(), request.size()) < 0 && errno != EPIPE) {
      return Status::IoError(std::string("cell worker: cannot send a cell: ") + std::strerror(errno));
    }
    started_ = Clock::now();
    return Status::Ok();
  }

  std::optional<AttemptEnd> Poll() override {
    AttemptEnd end;
    end.log = log_;
    char buf[64];
    const ssize_t n = read(reply_fd_, buf, sizeof buf);
    if (n > 0) reply_.append(buf, static_cast<size_t>(n));
    const size_t newline = reply_.find('\n');
    if (newline != std::string::npos) {
      end.wait_status = W_EXITCODE(std::atoi(reply_.substr(0, newline).c_str()), 0);
      reply_.clear();
      ++cells_;
      const bool worn = (o_.worker_max_cells > 0 && cells_ >= o_.worker_max_cells) ||
                        (o_.worker_max_rss_bytes > 0 && ResidentBytes(pid_) > o_.worker_max_rss_bytes);
      if (worn) Retire();
      return end;
    }
    if (n == 0) {  // the worker is gone: the cell crashed it
      waitpid(pid_, &end.wait_status, 0);
      Forget();
      return end;
    }
    if (!PastTimeout(started_, o_.timeout_seconds)) return std::nullopt;
    end.timed_out = true;
    end.wait_status = KillAndReap(pid_);
    Forget();
    return end;
  }

  int WakeFd() const override { return reply_fd_; }

  void Kill() override {
    if (pid_ > 0) KillAndReap(pid_);
    Forget();
  }

 private:
  Status StartWorker() {
    int request[2], reply[2];
    if (pipe2(request, O_CLOEXEC) != 0 || pipe2(reply, O_CLOEXEC) != 0) {
      return Status::IoError(std::string("cell worker: pipe: ") + std::strerror(errno));
    }
    log_ = scratch_ + "/worker-" + std::to_string(workers_started_++) + "-stderr.txt";
    const OutputFile err(log_);
    std::vector<std::string> args = {o_.framegate_binary, "run-cell", "--worker"};
    for (std::string& a : SettingsArgs(o_.settings)) args.push_back(std::move(a));
    StatusOr<pid_t> pid = Spawn(args, device_, request[0], reply[1], err.fd);
    close(request[0]);
    close(reply[1]);
    if (!pid.ok()) {
      close(request[1]);
      close(reply[0]);
      return pid.status();
    }
    pid_ = *pid;
    request_fd_ = request[1];
    reply_fd_ = reply[0];
    fcntl(reply_fd_, F_SETFL, O_NONBLOCK);
    cells_ = 0;
    ++processes_started_;
    return Status::Ok();
  }

  // Ends an idle worker: end of its requests, then a few seconds to exit.
  void Retire() {
    if (pid_ < 0) return;
    close(request_fd_);
    request_fd_ = -1;
    int status = 0;
    for (int i = 0; i < 500 && waitpid(pid_, &status, WNOHANG) == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (waitpid(pid_, &status, WNOHANG) == 0) KillAndReap(pid_);
    Forget();
  }

  void Forget() {
    if (request_fd_ >= 0) close(request_fd_);
    if (reply_fd_ >= 0) close(reply_fd_);
    request_fd_ = reply_fd_ = -1;
    pid_ = -1;
    reply_.clear();
  }

  const CellProcessOptions& o_;
  const std::string device_;
  const std::string scratch_;
  pid_t pid_ = -1;
  int request_fd_ = -1, reply_fd_ = -1;
  int cells_ = 0;  // cells this worker has run
  int workers_started_ = 0;
  std::string reply_;  // a reply line being read
  std::string log_;    // this worker's stderr outside cells
  Clock::time_point started_;
};

const char* SignalName(int sig) {
  switch (sig) {
    case SIGSEGV:
      return "SIGSEGV";
    case SIGABRT:
      return "SIGABRT";
    case SIGKILL:
      return "SIGKILL";
    case SIGBUS:
      return "SIGBUS";
    case SIGFPE:
      return "SIGFPE";
    case SIGILL:
      return "SIGILL";
    case SIGTERM:
      return "SIGTERM";
    default:
      return "signal";
  }
}

}  // namespace

CellResult ResultOfLostProcess(const Cell& cell, bool timed_out, int wait_status,
                               const std::string& last_stderr_line) {
  VerdictInputs in;
  in.expected_to_fail = cell.expected_to_fail();
  if (timed_out) {
    in.run = RunEnd::kTimeout;
    in.lost = "no result before the timeout; the process was killed";
  } else {
    in.run = RunEnd::kCrash;
    if (WIFSIGNALED(wait_status)) {
      const int sig = WTERMSIG(wait_status);
      in.lost = std::string("killed by ") + SignalName(sig) + " (" + std::to_string(sig) + ")";
      if (sig == SIGKILL) in.lost += ", possibly the out-of-memory killer";
    } else {
      in.lost = "exited with code " + std::to_string(WEXITSTATUS(wait_status)) + " without a result";
    }
    if (!last_stderr_line.empty()) in.lost += ": " + last_stderr_line;
  }
  return JudgedResult(cell, DecideVerdict(in));
}

std::optional<CellIsolation> ParseCellIsolation(const std::string& name) {
  if (name == "worker") return CellIsolation::kWorker;
  if (name == "process") return CellIsolation::kProcess;
  return std::nullopt;
}

StatusOr<MatrixRunSummary> RunCells(const std::vector<Cell>& cells, const CellProcessOptions& o,
                                    const CellStarted& on_started, const CellFinished& on_finished,
                                    const std::atomic<bool>* stop) {
  // A request to a worker that just died must not kill the runner with SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  // One queue per device, in matrix order; devices run in parallel, one cell each.
  std::map<std::string, std::vector<Attempt>> queues;
  for (const Cell& c : cells) queues[c.device].push_back({c, c.policy, ""});
  std::map<std::string, size_t> next;
  std::map<std::string, Running> running;  // by device
  const std::string scratch =
      (std::filesystem::temp_directory_path() / ("framegate-run-" + std::to_string(getpid()))).string();
  std::filesystem::create_directories(scratch);
  std::map<std::string, std::unique_ptr<CellSlot>> slots;  // by device
  for (const auto& [device, queue] : queues) {
    if (o.isolation == CellIsolation::kWorker) {
      slots[device] = std::make_unique<WorkerSlot>(o, device, scratch);
    } else {
      slots[device] = std::make_unique<ProcessSlot>(o, device);
    }
  }
  MatrixRunSummary summary;
  const auto finish = [&](StatusOr<MatrixRunSummary> outcome) {
    for (auto& [device, r] : running) slots[device]->Kill();
    for (auto& [device, slot] : slots) summary.processes_started += slot->processes_started();
    if (outcome.ok()) outcome->processes_started = summary.processes_started;
    slots.clear();  // workers end before their scratch folder goes
    std::filesystem::remove_all(scratch);
    return outcome;
  };

  while (true) {
    if (stop != nullptr && stop->load()) {
      summary.interrupted = true;
      return finish(summary);
    }
    for (auto& [device, queue] : queues) {
      if (running.count(device) || next[device] >= queue.size()) continue;
      Running r;
      r.attempt = queue[next[device]++];
      r.dir = scratch + "/" + r.attempt.cell.Id() + "-" + r.attempt.policy;
      std::filesystem::create_directories(r.dir);
      Cell cell = r.attempt.cell;
      cell.policy = r.attempt.policy;
      {
        std::ofstream out(r.dir + "/cell.json");
        out << CellToJson(cell).dump() << "\n";
        if (!out) return finish(Status::IoError(r.dir + "/cell.json: cannot write"));
      }
      const std::string artifacts = o.settings.run.artifacts_dir.empty()
                                        ? ""
                                        : o.settings.run.artifacts_dir + "/" + r.attempt.cell.Id();
      const Status started = slots[device]->Start(r.dir, artifacts);
      if (!started.ok()) return finish(started);
      if (on_started && r.attempt.history.empty()) on_started(r.attempt.cell);
      running.emplace(device, std::move(r));
    }
    if (running.empty()) break;
    std::vector<pollfd> wake;
    for (const auto& [device, r] : running) {
      if (slots[device]->WakeFd() >= 0) wake.push_back({slots[device]->WakeFd(), POLLIN, 0});
    }
    if (wake.size() == running.size()) {
      poll(wake.data(), wake.size(), 20);  // a worker's reply wakes the runner at once
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    for (auto it = running.begin(); it != running.end();) {
      Running& r = it->second;
      const std::optional<AttemptEnd> end = slots[it->first]->Poll();
      if (!end) {
        ++it;
        continue;
      }
      Cell ran = r.attempt.cell;
      ran.policy = r.attempt.policy;
      CellResult result;
      StatusOr<CellResult> parsed = Status::NotFound("");
      std::ifstream in(r.dir + "/result.json");
      if (!end->timed_out && in) {
        nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
        parsed = CellResultFromJson(j);
        if (summary.blas.empty() && j.is_object()) summary.blas = j.value(kProcessBlasKey, "");
      }
      std::string last_line = LastLine(r.dir + "/stderr.txt");
      if (last_line.empty() && !end->log.empty()) last_line = LastLine(end->log);
      const int status = end->wait_status;
      if (parsed.ok()) {
        result = *parsed;
      } else if (!end->timed_out && WIFEXITED(status) && WEXITSTATUS(status) == 2) {
        // Bad input the cell cannot be blamed for (a damaged golden, a broken package).
        summary.harness_error = true;
        VerdictInputs in;
        in.run = RunEnd::kError;
        in.error.cls = ErrorClass::kOther;
        in.error.message = last_line;
        in.expected_to_fail = ran.expected_to_fail();
        result = JudgedResult(ran, DecideVerdict(in));
      } else {
        result = ResultOfLostProcess(ran, end->timed_out, status, last_line);
      }
      // The store keeps the matrix's cell; the policy that produced the verdict is policy_used.
      result.cell = r.attempt.cell;
      result.policy_used = r.attempt.policy;
      const bool broken =
          result.status == CellStatus::kNonfinite || result.status == CellStatus::kBrokenFrames;
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
                          StatusName(result.status) +
                          (result.reason.empty() ? "" : " (" + result.reason + ")");
        }
        result.repro = CheckCommandFor(ran, o.settings.run.golden_dir);
        ++summary.finished;
        const Status recorded = on_finished(result);
        if (!recorded.ok()) return finish(recorded);
      }
      it = running.erase(it);
    }
  }
  return finish(summary);
}

}  // namespace framegate
