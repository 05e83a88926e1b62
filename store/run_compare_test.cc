#include "store/run_compare.h"

#include <gtest/gtest.h>

#include "store/synthetic_results.h"
#include "store/test_db.h"

namespace framegate {
namespace {

std::vector<double> Repeats(double center, int n) {
  std::vector<double> v;
  for (int i = 0; i < n; ++i) v.push_back(center * (1 + 0.002 * (i - n / 2)));
  return v;
}

CellResult Result(int index, CellStatus status, double psnr, double latency) {
  CellResult r = SyntheticCellResult(index, "cpu", 0);
  r.status = status;
  r.reason = status == CellStatus::kFail ? "min_psnr 20 < 30" : "";
  r.metrics->video.min_psnr = psnr;
  r.timings.generation_seconds = Repeats(latency, 6);
  return r;
}

void Record(ResultStore& store, const std::string& run_id, const std::string& started_at,
            const std::vector<CellResult>& cells) {
  ASSERT_TRUE(store.BeginRun(SyntheticRunInfo(run_id, started_at), {}).ok());
  for (const CellResult& r : cells) ASSERT_TRUE(store.RecordCell(run_id, r).ok());
}

const CellChange* Find(const RunComparison& c, ChangeKind kind, int index) {
  const std::string id = SyntheticCellResult(index, "cpu", 0).cell.Id();
  for (const CellChange& change : c.changes) {
    if (change.kind == kind && change.cell_id == id) return &change;
  }
  return nullptr;
}

class RunCompareTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto opened = ResultStore::Open(file_.path());
    ASSERT_TRUE(opened.ok());
    store_ = std::move(*opened);
    // Cell 8 has a noisy history: its PSNR moves by about 1 dB from night to night.
    for (int night = 0; night < 6; ++night) {
      Record(*store_, "old-" + std::to_string(night), "2024-04-2" + std::to_string(night) + "T03:00:00Z",
             {Result(8, CellStatus::kPass, 40 + (night % 2 ? 1.0 : -1.0), 0.5)});
    }
    const auto pass = CellStatus::kPass;
    Record(*store_, "A", "2024-05-01T03:00:00Z",
           {Result(0, pass, 40, 0.5), Result(1, CellStatus::kFail, 20, 0.5), Result(2, pass, 40, 0.5),
            Result(3, pass, 40, 0.5), Result(4, pass, 40, 0.5), Result(5, pass, 40, 0.5),
            Result(6, pass, 40, 0.5), Result(8, pass, 40, 0.5)});
    CellResult nonfinite = Result(0, CellStatus::kNonfinite, 40, 0.5);
    nonfinite.reason = "NaN at step 3";
    Record(*store_, "B", "2024-05-02T03:00:00Z",
           {nonfinite, Result(1, pass, 40, 0.5), Result(2, pass, 38, 0.5), Result(3, pass, 40, 0.6),
            Result(4, pass, 40, 0.51), Result(5, pass, 40, 0.5), Result(7, pass, 40, 0.5),
            Result(8, pass, 40.5, 0.5)});
  }
  TestDb file_{"compare"};
  std::unique_ptr<ResultStore> store_;
};

TEST_F(RunCompareTest, FindsEachKindOfChangeAndOnlyThose) {
  StatusOr<RunComparison> c = CompareRuns(*store_, "A", "B", CompareOptions());
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->cells_compared, 7);
  const CellChange* failing = Find(*c, ChangeKind::kNewlyFailing, 0);
  ASSERT_NE(failing, nullptr);
  EXPECT_EQ(failing->status_b, "NONFINITE");
  EXPECT_EQ(failing->reason_b, "NaN at step 3");
  EXPECT_NE(Find(*c, ChangeKind::kNewlyPassing, 1), nullptr);
  const CellChange* psnr = Find(*c, ChangeKind::kAccuracyWorse, 2);
  ASSERT_NE(psnr, nullptr);
  EXPECT_EQ(psnr->metric, "min_psnr");
  EXPECT_DOUBLE_EQ(psnr->value_b, 38);
  const CellChange* slower = Find(*c, ChangeKind::kSlower, 3);
  ASSERT_NE(slower, nullptr);
  EXPECT_LT(slower->p_value, 0.05);
  EXPECT_NEAR(slower->value_b / slower->value_a, 1.2, 1e-9);
  // Cell 4 is 2% slower: significant, but below --min-effect 5%.
  EXPECT_EQ(Find(*c, ChangeKind::kSlower, 4), nullptr);
  EXPECT_NE(Find(*c, ChangeKind::kOnlyInA, 6), nullptr);
  EXPECT_NE(Find(*c, ChangeKind::kOnlyInB, 7), nullptr);
  // Cell 8 moved 0.5 dB, inside its own night-to-night noise.
  EXPECT_EQ(Find(*c, ChangeKind::kAccuracyBetter, 8), nullptr);
  EXPECT_EQ(c->regressions(), 3);  // newly failing, PSNR worse, slower
  for (const CellChange& change : c->changes) {
    EXPECT_NE(change.cell_id, SyntheticCellResult(5, "cpu", 0).cell.Id()) << "unchanged cell";
  }
  const std::string text = FormatComparison(*c);
  EXPECT_NE(text.find("verdict: REGRESSION (3 changes)"), std::string::npos) << text;
  EXPECT_EQ(ComparisonToJson(*c)["regressions"], 3);
}

TEST_F(RunCompareTest, MinEffectAndAlphaAreHonoured) {
  CompareOptions loose;
  loose.min_effect = 0.01;
  StatusOr<RunComparison> c = CompareRuns(*store_, "A", "B", loose);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(Find(*c, ChangeKind::kSlower, 4), nullptr);
  CompareOptions strict;
  strict.alpha = 1e-6;  // 6 vs 6 repeats cannot reach it
  c = CompareRuns(*store_, "A", "B", strict);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(Find(*c, ChangeKind::kSlower, 3), nullptr);
}

TEST_F(RunCompareTest, ComparingARunWithItselfFindsNothing) {
  StatusOr<RunComparison> c = CompareRuns(*store_, "B", "B", CompareOptions());
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->changes.empty());
  EXPECT_NE(FormatComparison(*c).find("verdict: no regression"), std::string::npos);
}

TEST_F(RunCompareTest, UnknownRunIsNotFound) {
  StatusOr<RunComparison> c = CompareRuns(*store_, "A", "nope", CompareOptions());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Status::Code::kNotFound);
  EXPECT_NE(c.status().message().find("nope"), std::string::npos);
}

}  // namespace
}  // namespace framegate
