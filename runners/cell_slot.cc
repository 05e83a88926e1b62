#include "runners/cell_slot.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "matrix/device_discovery.h"

namespace framegate {
namespace {

using Clock = std::chrono::steady_clock;

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
  // The parent sets the group too, so that a kill right after the fork finds it (the
  // child's own setpgid may not have run yet; EACCES once it has exec'd is harmless).
  setpgid(pid, pid);
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

// Kills `pid`'s process group and reaps it; the wait status.
int KillAndReap(pid_t pid) {
  kill(-pid, SIGKILL);
  kill(pid, SIGKILL);  // the group may not exist yet when the child has not run setpgid
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

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
// the first cell and again after a crash, a timeout or a recycle. A worker that dies
// before it acknowledges a request died idle (or while reading it): the cell is sent to a
// new worker, once; only a worker that took the cell and died blames the cell.
class WorkerSlot : public CellSlot {
 public:
  WorkerSlot(const CellProcessOptions& o, std::string device, std::string scratch)
      : o_(o), device_(std::move(device)), scratch_(std::move(scratch)) {}
  ~WorkerSlot() override { Retire(); }

  Status Start(const std::string& dir, const std::string& artifacts) override {
    for (const std::string* path : {&dir, &artifacts}) {
      try {
        nlohmann::json(*path).dump();
      } catch (const nlohmann::json::exception&) {
        return Status::InvalidInput(*path + ": not UTF-8, so a cell worker cannot be sent this path");
      }
    }
    request_ = nlohmann::json{{"dir", dir}, {"artifacts", artifacts}}.dump() + "\n";
    resent_ = false;
    return Send();
  }

  std::optional<AttemptEnd> Poll() override {
    char buf[256];
    const ssize_t n = read(reply_fd_, buf, sizeof buf);
    if (n > 0) reply_.append(buf, static_cast<size_t>(n));
    for (size_t newline; (newline = reply_.find('\n')) != std::string::npos;) {
      const std::string line = reply_.substr(0, newline);
      reply_.erase(0, newline + 1);
      if (line == kWorkerTookCell) {
        taken_ = true;
        continue;
      }
      return Replied(line);
    }
    if (n == 0) return Died();
    if (!PastTimeout(started_, o_.timeout_seconds)) return std::nullopt;
    AttemptEnd end;
    end.log = log_;
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
  // Sends the request to the worker, starting one when there is none.
  Status Send() {
    if (pid_ < 0) FG_RETURN_IF_ERROR(StartWorker());
    taken_ = false;
    started_ = Clock::now();
    // A worker that died since its last reply shows as EOF on the replies (Poll).
    if (write(request_fd_, request_.data(), request_.size()) < 0 && errno != EPIPE) {
      return Status::IoError(std::string("cell worker: cannot send a cell: ") + std::strerror(errno));
    }
    return Status::Ok();
  }

  // The cell's exit code line arrived.
  AttemptEnd Replied(const std::string& line) {
    AttemptEnd end;
    end.log = log_;
    end.wait_status = W_EXITCODE(std::atoi(line.c_str()), 0);
    ++cells_;
    const bool worn = (o_.worker_max_cells > 0 && cells_ >= o_.worker_max_cells) ||
                      (o_.worker_max_rss_bytes > 0 && ResidentBytes(pid_) > o_.worker_max_rss_bytes);
    if (worn) Retire();
    return end;
  }

  // End of the replies: the worker is gone. Before it took the cell, the cell goes to a
  // new worker (nullopt: still running), once.
  std::optional<AttemptEnd> Died() {
    AttemptEnd end;
    end.log = log_;
    waitpid(pid_, &end.wait_status, 0);
    Forget();
    if (taken_) return end;  // the cell crashed it
    if (!resent_) {
      resent_ = true;
      const Status sent = Send();
      if (sent.ok()) return std::nullopt;
      end.note = "no new worker to take the cell: " + sent.message();
      return end;
    }
    end.note = "the worker died before it took the cell, and so did a new one";
    return end;
  }

  Status StartWorker() {
    int request[2], reply[2];
    if (pipe2(request, O_CLOEXEC) != 0) {
      return Status::IoError(std::string("cell worker: pipe: ") + std::strerror(errno));
    }
    if (pipe2(reply, O_CLOEXEC) != 0) {
      close(request[0]);
      close(request[1]);
      return Status::IoError(std::string("cell worker: pipe: ") + std::strerror(errno));
    }
    log_ = scratch_ + "/worker-" + std::to_string(workers_started_++) + "-stderr.txt";
    const OutputFile err(log_);
    std::vector<std::string> args = {o_.framegate_binary, "run-cell", "--worker"};
    for (std::string& a : SettingsArgs(o_.settings)) args.push_back(std::move(a));
    StatusOr<pid_t> pid = err.fd < 0 ? StatusOr<pid_t>(Status::IoError(log_ + ": cannot create"))
                                     : Spawn(args, device_, request[0], reply[1], err.fd);
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
  std::string request_;  // the request of the cell being run
  bool taken_ = false;   // the worker acknowledged it
  bool resent_ = false;  // it went to a second worker
  std::string reply_;    // reply lines being read
  std::string log_;      // this worker's stderr outside cells
  Clock::time_point started_;
};

}  // namespace

std::unique_ptr<CellSlot> MakeCellSlot(const CellProcessOptions& o, const std::string& device,
                                       const std::string& scratch) {
  if (o.isolation == CellIsolation::kWorker) return std::make_unique<WorkerSlot>(o, device, scratch);
  return std::make_unique<ProcessSlot>(o, device);
}

}  // namespace framegate
