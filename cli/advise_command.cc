// framegate advise: the precision advisor. For a cell that fails under a policy, finds
// the modules to keep in FP32 so that it passes, proves it by running, and prints the
// policy as a [policy.NAME] table a matrix file accepts. Exit 0 when a passing policy
// was found and verified (or the cell passes as it is), 1 when none was found within
// --max-runs (or the failure is not one FP32 islands can cure), 2 on bad input.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "cli/commands.h"
#include "cli/output_file.h"
#include "harness/build_info.h"
#include "harness/cell_result_json.h"
#include "harness/printf.h"
#include "runners/precision_advisor.h"
#include "store/result_store.h"

namespace framegate {
namespace {

struct AdviseCliOptions {
  PipelineCliOptions pipeline;
  std::string golden_dir;
  std::string json_path;
  std::string db;
  int max_runs = 12;
  int verify_seeds = AdviseOptions().verify_seeds;
  double max_share_percent = 50;
  int threads = 0;
};

std::string IslandList(const std::vector<std::string>& islands) {
  if (islands.empty()) return "(none)";
  std::string list;
  for (const std::string& i : islands) list += (list.empty() ? "" : ", ") + i;
  return list;
}

// A temporary folder for the candidate policy files, removed with this object.
class WorkDir {
 public:
  WorkDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "framegate-advise-XXXXXX").string();
    if (mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~WorkDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Records the observed cell with its advice as a run of its own (tag "advise").
Status RecordAdvice(const std::string& db, const Cell& cell, CellResult observed, const Advice& advice,
                    const std::string& command) {
  observed.advice = advice;
  StatusOr<std::unique_ptr<ResultStore>> store = ResultStore::Open(db);
  if (!store.ok()) return store.status();
  const RunInfo info = NewRunInfo("advise", command, CollectBuildInfo());
  FG_RETURN_IF_ERROR((*store)->BeginRun(info, {{cell.device, cell.device, "", 0, ""}}));
  FG_RETURN_IF_ERROR((*store)->RecordCell(info.run_id, observed));
  return (*store)->FinishRun(info.run_id, "finished", NowIso8601());
}

int RunAdvise(const AdviseCliOptions& o) {
  ConfigureThreads(o.threads);
  std::vector<Cell> cells = o.pipeline.ToCells();
  if (cells.size() != 1) {
    return ReportError(
        Status::InvalidInput("--policy: give exactly one policy, not '" + o.pipeline.policy + "'"));
  }
  const Cell& cell = cells[0];
  std::ostream& text = TextStream({o.json_path});
  WorkDir work;
  if (work.path().empty()) return ReportError(Status::IoError("cannot create a temporary folder"));
  AdviseOptions options;
  options.run.golden_dir = o.golden_dir;
  options.max_runs = o.max_runs;
  options.verify_seeds = o.verify_seeds;
  options.max_weight_share = o.max_share_percent / 100.0;
  options.work_dir = work.path();
  text << "advise " << cell.Label() << " (at most " << o.max_runs << " runs)\n";
  options.on_run = [&text, n = 0](const AdviceRun& run) mutable {
    char head[32];
    std::snprintf(head, sizeof head, "run %2d  ", ++n);
    text << head << StatusName(run.status) << (run.seed ? " at seed " + std::to_string(*run.seed) : "")
         << "  islands: " << IslandList(run.islands) << (run.reason.empty() ? "" : "  (" + run.reason + ")")
         << std::endl;
  };
  CellResult observed;
  StatusOr<Advice> advice = AdvisePrecision(cell, options, &observed);
  if (!advice.ok()) return ReportError(advice.status());
  const Advice& a = *advice;
  if (!a.culprit.empty()) {
    text << "error made in: " << a.culprit << " (its own island keeps "
         << PercentText(a.culprit_weight_fraction) << " of the weights in FP32)\n";
  }
  if (a.status_before == CellStatus::kPass) {
    text << "the cell passes under " << cell.policy << " as it is: nothing to keep in FP32\n";
  } else if (a.found()) {
    text << "FP32 islands: " << IslandList(a.islands) << "\n"
         << "weights kept in FP32: " << PercentText(a.fp32_weight_fraction) << " of the model's\n"
         << (a.note.empty() ? "" : a.note + "\n")
         << "the policy (add it to a matrix file, or pass the file with --policy-file):\n\n"
         << a.policy_toml << "\n";
  } else if (!a.note.empty()) {
    text << a.note << "\n";
  } else if (a.runs.size() == 1) {
    text << "cannot advise: " << StatusName(a.status_before)
         << " is not a failure FP32 islands cure (NONFINITE, BROKEN_FRAMES, FAIL, ERROR "
            "dtype_mismatch or value_overflow)\n";
  } else {
    text << "no passing set of FP32 islands found in " << a.runs.size()
         << " runs (last: " << StatusName(a.status_after) << "); try a larger --max-runs\n";
  }
  if (!o.json_path.empty()) {
    const Status written = WriteOutputFile(o.json_path, AdviceToJson(a).dump(2) + "\n");
    if (!written.ok()) return ReportError(written);
  }
  if (!o.db.empty()) {
    const Status recorded = RecordAdvice(o.db, cell, observed, a, "framegate advise");
    if (!recorded.ok()) return ReportError(recorded);
    text << "recorded in " << o.db << "\n";
  }
  if (a.found() && !a.verified) text << "the islands are not verified (exit 1): see above\n";
  return (a.found() && a.verified) || a.status_before == CellStatus::kPass ? kExitOk : kExitFailed;
}

}  // namespace

Command AddAdviseCommand(CLI::App& parent) {
  auto o = std::make_shared<AdviseCliOptions>();
  CLI::App* app =
      parent.add_subcommand("advise",
                            "Find the modules to keep in FP32 so that a failing cell passes, proven by "
                            "running (exit 0 found and verified, 1 none or not verified, 2 bad input)");
  AddPipelineOptions(app, &o->pipeline);
  AddGoldenDirOption(app, &o->golden_dir);
  AddOutputFileOption(app, "--json", &o->json_path, "Write the advice as JSON");
  app->add_option("--max-runs", o->max_runs, "Runs of the cell in all, the first included")
      ->check(CLI::Range(2, 1000))
      ->capture_default_str();
  app->add_option("--verify-seeds", o->verify_seeds,
                  "Also run the islands at up to N other seeds (0-7) whose goldens the golden folder "
                  "holds (7: all of them); islands that fail there grow from that run (0: the cell's "
                  "seed only)")
      ->check(CLI::Range(0, 7))
      ->capture_default_str();
  app->add_option("--max-share", o->max_share_percent,
                  "The largest share of the weights (percent) the islands may keep in FP32")
      ->check(CLI::Range(0.0, 100.0))
      ->capture_default_str();
  app->add_option("--db", o->db, "Also record the cell and its advice in this SQLite store");
  AddThreadsOption(app, &o->threads);
  return {app, [o] { return RunAdvise(*o); }};
}

}  // namespace framegate
