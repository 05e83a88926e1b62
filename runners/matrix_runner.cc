#include "runners/matrix_runner.h"

#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <thread>

#include <nlohmann/json.hpp>

#include "checks/verdict.h"
#include "harness/cell_result_json.h"
#include "pipelines/dtype_policy.h"
#include "runners/cell_slot.h"
#include "runners/scratch_folder.h"

namespace framegate {
namespace {

struct Attempt {
  Cell cell;                       // as the matrix gave it
  std::string policy;              // the policy this attempt runs (differs after a fallback)
  std::string history;             // "fp16-emulated NONFINITE (...) -> " for fallbacks so far
  std::vector<std::string> tried;  // the policies of the earlier attempts, in order
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

FallbackStep NextFallback(const std::vector<std::string>& tried, const std::string& fallback) {
  FallbackStep step;
  if (fallback.empty()) return step;
  if (std::find(tried.begin(), tried.end(), fallback) == tried.end()) {
    step.next = fallback;
  } else {
    step.stopped = "the fallback chain repeated: " + (tried.empty() ? std::string("?") : tried.back()) +
                   " falls back to " + fallback + ", already tried";
  }
  return step;
}

namespace {

Cell CellOf(const Attempt& a) {
  Cell cell = a.cell;
  cell.policy = a.policy;
  return cell;
}

// Makes the attempt's folder `dir` (new: a folder left by anything else is an error) and
// writes its cell.json there.
Status PrepareAttemptFolder(const Attempt& a, const std::string& dir) {
  if (mkdir(dir.c_str(), 0755) != 0) {
    return Status::IoError(dir + ": cannot create the cell's folder: " + std::strerror(errno));
  }
  std::string json;
  try {
    json = CellToJson(CellOf(a)).dump();
  } catch (const nlohmann::json::exception&) {  // a name that is not UTF-8
    return Status::InvalidInput(dir + "/cell.json: the cell has a name that is not UTF-8");
  }
  std::ofstream out(dir + "/cell.json");
  out << json << "\n";
  out.close();
  if (!out) return Status::IoError(dir + "/cell.json: cannot write");
  return Status::Ok();
}

// The result of attempt `r` that ended as `end`: what its process wrote to result.json,
// else the verdict on how the process ended (ERROR for bad input it reported, TIMEOUT,
// CRASH). Notes the BLAS the process reported, and bad input, in `summary`.
CellResult ResultOfAttempt(const Running& r, const AttemptEnd& end, MatrixRunSummary* summary) {
  const Cell ran = CellOf(r.attempt);
  std::ifstream in(r.dir + "/result.json");
  if (!end.timed_out && in) {
    const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    StatusOr<CellResult> parsed = CellResultFromJson(j);
    if (parsed.ok()) {
      const auto blas = j.find(kProcessBlasKey);
      if (summary->blas.empty() && blas != j.end() && blas->is_string())
        summary->blas = blas->get<std::string>();
      return *parsed;
    }
  }
  std::string last_line = LastLine(r.dir + "/stderr.txt");
  if (last_line.empty() && !end.log.empty()) last_line = LastLine(end.log);
  if (!end.note.empty()) last_line = end.note + (last_line.empty() ? "" : ": " + last_line);
  const int status = end.wait_status;
  if (!end.timed_out && WIFEXITED(status) && WEXITSTATUS(status) == 2) {
    // Bad input the cell cannot be blamed for (a damaged golden, a broken package).
    summary->harness_error = true;
    VerdictInputs verdict;
    verdict.run = RunEnd::kError;
    verdict.error.cls = ErrorClass::kOther;
    verdict.error.message = last_line;
    verdict.expected_to_fail = ran.expected_to_fail();
    return JudgedResult(ran, DecideVerdict(verdict));
  }
  return ResultOfLostProcess(ran, end.timed_out, status, last_line);
}

// With --fallback, after attempt `a` ended with `*result`: the attempt with its policy's
// fallback, or nullopt when the cell is finished. Then a fallback chain (or the reason
// it stopped) goes into the result's reason.
std::optional<Attempt> NextAttempt(const Attempt& a, CellResult* result) {
  std::string stopped;
  if (result->status == CellStatus::kNonfinite || result->status == CellStatus::kBrokenFrames) {
    StatusOr<DtypePolicy> policy = FindPolicyIn(a.policy, a.cell.policy_file);
    std::vector<std::string> tried = a.tried;
    tried.push_back(a.policy);
    const FallbackStep step = NextFallback(tried, policy.ok() ? policy->fallback : "");
    if (!step.next.empty()) {
      Attempt retry = a;
      retry.tried = tried;
      retry.history += a.policy + " " + StatusName(result->status) + " (" + result->reason + ") -> ";
      retry.policy = step.next;
      return retry;
    }
    stopped = step.stopped;
  }
  if (!a.history.empty() || !stopped.empty()) {
    result->reason = "fallback: " + a.history + a.policy + " " + StatusName(result->status) +
                     (result->reason.empty() ? "" : " (" + result->reason + ")") +
                     (stopped.empty() ? "" : "; " + stopped);
  }
  return std::nullopt;
}

}  // namespace

StatusOr<MatrixRunSummary> RunCells(const std::vector<Cell>& cells, const CellProcessOptions& o,
                                    const CellStarted& on_started, const CellFinished& on_finished,
                                    const std::atomic<bool>* stop) {
  // A request to a worker that just died must not kill the runner with SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  StatusOr<std::unique_ptr<ScratchFolder>> scratch_folder = ScratchFolder::Create(TempDirectory());
  if (!scratch_folder.ok()) return scratch_folder.status();
  const std::string scratch = (*scratch_folder)->path();
  // One queue per device, in matrix order; devices run in parallel, one cell each.
  std::map<std::string, std::vector<Attempt>> queues;
  for (const Cell& c : cells) queues[c.device].push_back({c, c.policy, "", {}});
  std::map<std::string, size_t> next;
  std::map<std::string, int> attempts;                     // by cell id: attempts started
  std::map<std::string, Running> running;                  // by device
  std::map<std::string, std::unique_ptr<CellSlot>> slots;  // by device
  for (const auto& [device, queue] : queues) slots[device] = MakeCellSlot(o, device, scratch);
  MatrixRunSummary summary;
  const auto finish = [&](StatusOr<MatrixRunSummary> outcome) {
    for (auto& [device, r] : running) slots[device]->Kill();
    for (auto& [device, slot] : slots) summary.processes_started += slot->processes_started();
    if (outcome.ok()) outcome->processes_started = summary.processes_started;
    slots.clear();  // workers end before their scratch folder goes
    scratch_folder->reset();
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
      // Named by cell id and attempt only: nothing a matrix names reaches the path.
      const std::string id = r.attempt.cell.Id();
      r.dir = scratch + "/" + id + "-" + std::to_string(++attempts[id]);
      const Status prepared = PrepareAttemptFolder(r.attempt, r.dir);
      if (!prepared.ok()) return finish(prepared);
      const std::string artifacts =
          o.settings.run.artifacts_dir.empty() ? "" : o.settings.run.artifacts_dir + "/" + id;
      const Status started = slots[device]->Start(r.dir, artifacts);
      if (!started.ok()) return finish(started);
      if (on_started && r.attempt.tried.empty()) on_started(r.attempt.cell);
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
      const Running& r = it->second;
      const std::optional<AttemptEnd> end = slots[it->first]->Poll();
      if (!end) {
        ++it;
        continue;
      }
      CellResult result = ResultOfAttempt(r, *end, &summary);
      // The store keeps the matrix's cell; the policy that produced the verdict is policy_used.
      result.cell = r.attempt.cell;
      result.policy_used = r.attempt.policy;
      const std::optional<Attempt> retry = o.fallback ? NextAttempt(r.attempt, &result) : std::nullopt;
      if (retry) {
        auto& queue = queues[it->first];
        queue.insert(queue.begin() + static_cast<long>(next[it->first]), *retry);
      } else {
        result.repro = CheckCommandFor(CellOf(r.attempt), o.settings.run.golden_dir);
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
