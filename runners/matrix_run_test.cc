#include "runners/matrix_run.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "store/test_db.h"

namespace framegate {
namespace {

// Every cell of these runs is on cuda:0, which kCpuOnly lacks: UNSUPPORTED with any
// LibTorch (FP16 on the CPU runs from 2.2 on), recorded without a cell process, so the
// whole use case (plan, begin, record, finish, resume) runs against a real store without
// LibTorch.
const std::vector<DeviceInfo> kCpuOnly = {{"cpu", "test CPU", "", 0, ""}};

std::string WriteMatrix(const TestDb& dir, const std::string& extra) {
  const std::string path = dir.dir() + "/m.toml";
  std::ofstream(path) << "name = \"m\"\n[axes]\npipelines = [\"tiny\"]\ndevices = [\"cuda:0\"]\n"
                         "policies = [\"fp16\"]\nseeds = [0, 1, 2, 3, 4, 5, 6, 7]\n"
                      << extra;
  return path;
}

MatrixRunRequest RequestFor(const std::string& matrix, const std::string& shard) {
  MatrixRunRequest request;
  request.matrix = matrix;
  request.found = kCpuOnly;
  request.shard = shard;
  request.new_run.run_id = "run-1";
  request.new_run.started_at = "2024-06-01T00:00:00Z";
  request.new_run.command = "framegate run m.toml --shard " + shard;
  request.new_run.argv = {"m.toml", "--shard", shard};
  return request;
}

StatusOr<MatrixRunOutcome> RunRequest(const MatrixRunRequest& request, ResultStore& store) {
  StatusOr<MatrixRunPlan> plan = PlanMatrixRun(request);
  if (!plan.ok()) return plan.status();
  return RunMatrixIntoStore(request, *plan, store, MatrixRunObservers(), nullptr);
}

TEST(MatrixRunTest, RecordsUnsupportedCellsThroughTheVerdictAndFinishesTheRun) {
  TestDb db("run");
  const std::string matrix = WriteMatrix(db, "");
  auto store = ResultStore::Open(db.path());
  ASSERT_TRUE(store.ok());
  int begun_cells = -1, recorded = 0;
  MatrixRunObservers observers;
  observers.on_begun = [&](const RunInfo& run, int cells) {
    EXPECT_EQ(run.run_id, "run-1");
    begun_cells = cells;
  };
  observers.on_recorded = [&](const CellResult& r) {
    EXPECT_EQ(r.status, CellStatus::kUnsupported);
    ++recorded;
  };
  const MatrixRunRequest request = RequestFor(matrix, "");
  StatusOr<MatrixRunPlan> plan = PlanMatrixRun(request);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  StatusOr<MatrixRunOutcome> outcome = RunMatrixIntoStore(request, *plan, **store, observers, nullptr);
  ASSERT_TRUE(outcome.ok()) << outcome.status().message();
  EXPECT_FALSE(outcome->interrupted);
  EXPECT_EQ(outcome->cells_run, 0);
  EXPECT_EQ(begun_cells, 8);
  EXPECT_EQ(recorded, 8);
  StatusOr<RunRecord> run = (*store)->LoadRun("run-1");
  ASSERT_TRUE(run.ok());
  EXPECT_EQ(run->info.state, "finished");
  EXPECT_EQ(run->info.matrix_path, matrix);
  EXPECT_EQ(run->info.matrix_sha256, plan->spec.sha256);
  EXPECT_EQ(run->info.argv, request.new_run.argv);
  EXPECT_EQ(run->cells.size(), 8u);
}

TEST(MatrixRunTest, ResumeRefusesAMatrixThatChangedAndStoresNothing) {
  TestDb db("changed");
  const std::string matrix = WriteMatrix(db, "");
  auto store = ResultStore::Open(db.path());
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE(RunRequest(RequestFor(matrix, "1/2"), **store).ok());
  const int64_t cells = QueryInt(db.path(), "SELECT count(*) FROM cells");
  WriteMatrix(db, "# edited\n");
  MatrixRunRequest resume = RequestFor(matrix, "1/2");
  resume.resume_run_id = "run-1";
  StatusOr<MatrixRunOutcome> refused = RunRequest(resume, **store);
  ASSERT_EQ(refused.status().code(), Status::Code::kInvalidInput);
  EXPECT_NE(refused.status().message().find("--resume run-1: the matrix " + matrix), std::string::npos)
      << refused.status().message();
  EXPECT_NE(refused.status().message().find("sha256"), std::string::npos);
  EXPECT_EQ(QueryInt(db.path(), "SELECT count(*) FROM cells"), cells);
  EXPECT_EQ((*(*store)->LoadRunInfo("run-1")).state, "finished");
}

TEST(MatrixRunTest, ResumeRunsOnlyTheStoredShard) {
  TestDb db("shard");
  const std::string matrix = WriteMatrix(db, "");
  auto store = ResultStore::Open(db.path());
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE(RunRequest(RequestFor(matrix, "2/2"), **store).ok());
  const int64_t shard_cells = QueryInt(db.path(), "SELECT count(*) FROM cells");
  ASSERT_GT(shard_cells, 0);
  ASSERT_LT(shard_cells, 8);
  // Forget one recorded cell, as if the run had been interrupted before it.
  ExecSql(db.path(), "DELETE FROM cells WHERE id = (SELECT max(id) FROM cells)");
  for (const std::string other : {"1/2", "", "2/3"}) {
    MatrixRunRequest resume = RequestFor(matrix, other);
    resume.resume_run_id = "run-1";
    StatusOr<MatrixRunOutcome> refused = RunRequest(resume, **store);
    ASSERT_EQ(refused.status().code(), Status::Code::kInvalidInput) << other;
    EXPECT_NE(refused.status().message().find("the run is shard 2/2"), std::string::npos)
        << refused.status().message();
  }
  EXPECT_EQ(QueryInt(db.path(), "SELECT count(*) FROM cells"), shard_cells - 1);
  MatrixRunRequest resume = RequestFor(matrix, "2/2");
  resume.resume_run_id = "run-1";
  resume.new_run.run_id = "ignored";
  resume.new_run.argv = {"--resume", "run-1"};
  int begun_cells = -1;
  MatrixRunObservers observers;
  observers.on_begun = [&](const RunInfo&, int cells) { begun_cells = cells; };
  StatusOr<MatrixRunPlan> plan = PlanMatrixRun(resume);
  ASSERT_TRUE(plan.ok());
  StatusOr<MatrixRunOutcome> resumed = RunMatrixIntoStore(resume, *plan, **store, observers, nullptr);
  ASSERT_TRUE(resumed.ok()) << resumed.status().message();
  EXPECT_EQ(begun_cells, shard_cells);
  EXPECT_EQ(QueryInt(db.path(), "SELECT count(*) FROM cells"), shard_cells);
  EXPECT_EQ(QueryInt(db.path(), "SELECT count(*) FROM runs"), 1);
  // The resumed run is the stored one: its command and argv are not the resume's.
  EXPECT_EQ(resumed->run.run_id, "run-1");
  EXPECT_EQ(resumed->run.command, "framegate run m.toml --shard 2/2");
  EXPECT_EQ(resumed->run.argv, (std::vector<std::string>{"m.toml", "--shard", "2/2"}));
  EXPECT_EQ(resumed->run.state, "finished");
}

TEST(MatrixRunTest, AnUnknownResumeRunIsNotFoundAndABadShardIsRefusedBeforeTheStore) {
  TestDb db("unknown");
  const std::string matrix = WriteMatrix(db, "");
  auto store = ResultStore::Open(db.path());
  ASSERT_TRUE(store.ok());
  MatrixRunRequest resume = RequestFor(matrix, "");
  resume.resume_run_id = "no-such-run";
  EXPECT_EQ(RunRequest(resume, **store).status().code(), Status::Code::kNotFound);
  EXPECT_EQ(PlanMatrixRun(RequestFor(matrix, "3/2")).status().code(), Status::Code::kInvalidInput);
  EXPECT_EQ(QueryInt(db.path(), "SELECT count(*) FROM runs"), 0);
}

// The words `sh` passes to `framegate` when `line` is pasted into it in `dir`: a shell
// function named framegate prints them, one a line.
std::vector<std::string> WordsShellRuns(const std::string& dir, const std::string& line) {
  const std::string script = "cd " + dir + " && framegate() { printf '%s\\n' \"$@\"; }; " + line;
  std::ofstream(dir + "/script.sh") << script << "\n";
  FILE* sh = popen(("sh " + dir + "/script.sh").c_str(), "r");
  std::vector<std::string> words;
  char buffer[4096];
  while (sh != nullptr && fgets(buffer, sizeof buffer, sh) != nullptr) {
    std::string word = buffer;
    if (!word.empty() && word.back() == '\n') word.pop_back();
    words.push_back(word);
  }
  if (sh != nullptr) pclose(sh);
  return words;
}

TEST(MatrixRunTest, CommandLinesGiveShellTheWordsBackAndRunNothing) {
  TestDb dir("quoted");
  const std::vector<std::string> words = {
      "--policy", "half emu $(touch PWNED)", "--db", "it's `touch PWNED`.db", "--tags", "a;touch PWNED"};
  RunInfo run;
  run.run_id = "20240601T000000Z-0badf00d";
  run.command = RunCommandLine(words);
  std::vector<std::string> expected = {"run"};
  expected.insert(expected.end(), words.begin(), words.end());
  EXPECT_EQ(WordsShellRuns(dir.dir(), run.command), expected);
  // One --resume, after the run's own words.
  expected.push_back("--resume");
  expected.push_back(run.run_id);
  EXPECT_EQ(WordsShellRuns(dir.dir(), ResumeCommandLine(run)), expected);
  EXPECT_FALSE(std::filesystem::exists(dir.dir() + "/PWNED"));
}

}  // namespace
}  // namespace framegate
