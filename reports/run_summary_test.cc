#include "reports/run_summary.h"

#include <gtest/gtest.h>

#include <cmath>

#include "reports/report_test_data.h"

namespace framegate {
namespace {

using testing_data::MakeResult;
using testing_data::SampleRun;

TEST(RunSummaryTest, Statistics) {
  EXPECT_DOUBLE_EQ(Median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(Median({4, 1, 2, 3}), 2.5);
  EXPECT_TRUE(std::isnan(Median({})));
  EXPECT_DOUBLE_EQ(Mean({1, 2, 6}), 3);
  EXPECT_DOUBLE_EQ(SampleStddev({2, 4, 4, 4, 5, 5, 7, 9}), std::sqrt(32.0 / 7));
  EXPECT_DOUBLE_EQ(SampleStddev({5}), 0);
}

TEST(RunSummaryTest, FormatsTimesAndPsnr) {
  EXPECT_EQ(FormatSeconds(0.85), "850 ms");
  EXPECT_EQ(FormatSeconds(1.234), "1.23 s");
  EXPECT_EQ(FormatSeconds(125), "2m05s");
  EXPECT_EQ(FormatSeconds(NAN), "-");
  EXPECT_EQ(FormatPsnr(41.234), "41.23 dB");
  EXPECT_EQ(FormatPsnr(INFINITY), "inf dB");
}

TEST(RunSummaryTest, SummaryIsMetricForPassesAndReasonOtherwise) {
  const RunRecord run = SampleRun();
  EXPECT_EQ(CellSummary(run.cells[0]), "PSNR 41.50 dB, SSIM 0.9980");
  EXPECT_EQ(CellSummary(run.cells[1]), "min_psnr 23.1 < 30");
  EXPECT_EQ(CellSummary(run.cells[3]), "dtype_mismatch: expected Float but found Half");
  EXPECT_DOUBLE_EQ(MedianGenerationSeconds(run.cells[0]), 1.2);
}

TEST(RunSummaryTest, NonfiniteFramesNeverShowAnInfinitePsnr) {
  const RunRecord run = SampleRun();
  const CellResult& nonfinite = run.cells[2];
  ASSERT_TRUE(std::isinf(nonfinite.metrics->video.min_psnr));  // what JSON null reads as
  EXPECT_TRUE(std::isnan(ShownMinPsnr(nonfinite)));
  EXPECT_TRUE(std::isnan(ShownFramePsnr(nonfinite, 0)));
  EXPECT_TRUE(std::isnan(ShownMetrics(nonfinite)[0].value));
  EXPECT_EQ(ShownMetrics(nonfinite)[0].name, "min_psnr");
}

TEST(RunSummaryTest, GridHasDeviceRowsAndPolicyColumns) {
  const RunRecord run = SampleRun();
  const std::vector<PipelineGrid> grids = BuildGrids(run.cells);
  ASSERT_EQ(grids.size(), 1u);
  const PipelineGrid& grid = grids[0];
  EXPECT_EQ(grid.pipeline, "reference:tiny");
  EXPECT_EQ(grid.policies, (std::vector<std::string>{"fp32", "bf16", "fp16-emulated", "fp8-e5m2", "fp16"}));
  ASSERT_EQ(grid.rows.size(), 2u);
  EXPECT_EQ(grid.rows[0].label, "cpu");
  EXPECT_EQ(grid.rows[1].label, "cuda:0");
  ASSERT_EQ(grid.rows[1].columns.size(), 5u);
  ASSERT_EQ(grid.rows[1].columns[1].size(), 1u);
  EXPECT_EQ(grid.rows[1].columns[1][0]->status, CellStatus::kXfail);
  EXPECT_TRUE(grid.rows[1].columns[4].empty());
}

TEST(RunSummaryTest, RowLabelsNameSeedsOnlyWhenThereAreSeveral) {
  std::vector<CellResult> cells = {MakeResult("cpu", "fp32", CellStatus::kPass, ""),
                                   MakeResult("cpu", "fp32", CellStatus::kFail, "x")};
  cells[1].cell.seed = 1;
  CellResult model = MakeResult("cpu", "fp32", CellStatus::kPass, "");
  model.cell.model_dir = "/models/my.model";
  model.cell.fault = "f2";
  cells.push_back(model);
  const std::vector<PipelineGrid> grids = BuildGrids(cells);
  ASSERT_EQ(grids.size(), 2u);
  ASSERT_EQ(grids[0].rows.size(), 2u);
  EXPECT_EQ(grids[0].rows[0].label, "cpu seed=0");
  EXPECT_EQ(grids[0].rows[1].label, "cpu seed=1");
  EXPECT_EQ(grids[1].pipeline, "model:my.model");
  EXPECT_EQ(grids[1].rows[0].label, "cpu fault=f2");
}

TEST(RunSummaryTest, CountsAndFailures) {
  const RunRecord run = SampleRun();
  const StatusCounts counts = CountStatuses(run.cells);
  EXPECT_EQ(counts.total, 7);
  EXPECT_EQ(counts.failures, 4);  // FAIL, NONFINITE, ERROR, TIMEOUT
  EXPECT_EQ(CountsLine(counts),
            "7 cells: 1 PASS, 1 FAIL, 1 NONFINITE, 1 ERROR, 1 UNSUPPORTED, 1 TIMEOUT, 1 XFAIL");
  EXPECT_EQ(FailingCells(run.cells).size(), 4u);
  EXPECT_GT(StatusSeverity(CellStatus::kCrash), StatusSeverity(CellStatus::kFail));
  EXPECT_GT(StatusSeverity(CellStatus::kFail), StatusSeverity(CellStatus::kPass));
}

}  // namespace
}  // namespace framegate
