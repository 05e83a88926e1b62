#include "reports/json_report.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "harness/cell_result_json.h"
#include "reports/report_test_data.h"

namespace framegate {
namespace {

using nlohmann::json;
using testing_data::FreshDir;
using testing_data::SampleRun;

TEST(JsonReportTest, RoundTripsTheRunThroughAFile) {
  const RunRecord run = SampleRun();
  const std::string path = FreshDir("json_roundtrip") + "/run.json";
  ASSERT_TRUE(WriteJsonReport(run, path).ok());
  StatusOr<RunRecord> back = ReadJsonReport(path);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->info.run_id, run.info.run_id);
  EXPECT_EQ(back->info.host, "nightly-01");
  ASSERT_EQ(back->devices.size(), 2u);
  EXPECT_EQ(back->devices[1].driver, "550.54");
  EXPECT_EQ(back->devices[0].memory_bytes, 1LL << 36);
  ASSERT_EQ(back->cells.size(), run.cells.size());
  for (size_t i = 0; i < run.cells.size(); ++i) {
    EXPECT_EQ(CellResultToJson(back->cells[i]), CellResultToJson(run.cells[i])) << i;
  }
  // The model-package and advisor fields, named so that a lost one is seen at once.
  const CellResult& nonfinite = back->cells[2];
  EXPECT_EQ(nonfinite.cell.policy_file, "matrix/<islands>.toml");
  EXPECT_EQ(nonfinite.first_nonfinite.op, "aten::exp");
  EXPECT_EQ(nonfinite.first_nonfinite.count.nan, 10);
  EXPECT_EQ(nonfinite.observed, run.cells[2].observed);
  ASSERT_EQ(nonfinite.probes.size(), 2u);
  EXPECT_DOUBLE_EQ(nonfinite.probes[0].sqnr_db, 12.5);
  EXPECT_TRUE(std::isnan(nonfinite.probes[1].sqnr_db));
  ASSERT_TRUE(nonfinite.advice.has_value());
  EXPECT_EQ(nonfinite.advice->status_after, CellStatus::kPass);
  EXPECT_EQ(nonfinite.advice->islands, run.cells[2].advice->islands);
  ASSERT_EQ(nonfinite.advice->runs.size(), 2u);
  EXPECT_EQ(nonfinite.advice->runs[0].reason, "min_psnr 28 < 30");
  EXPECT_EQ(nonfinite.advice->policy_toml, run.cells[2].advice->policy_toml);
  EXPECT_DOUBLE_EQ(nonfinite.advice->fp32_weight_fraction, 0.0625);
  EXPECT_EQ(back->cells[3].error_module, "denoiser.embed.time_mlp.0");
  EXPECT_EQ(back->cells[3].error_op, "aten::linear");
  EXPECT_FALSE(back->cells[0].advice.has_value());
}

TEST(JsonReportTest, WritesTheSummaryCounts) {
  const json j = RunRecordToJson(SampleRun());
  EXPECT_EQ(j["format"], "framegate-run");
  EXPECT_EQ(j["summary"]["cells"], 7);
  EXPECT_EQ(j["summary"]["failures"], 4);
  EXPECT_EQ(j["summary"]["by_status"]["XFAIL"], 1);
  EXPECT_EQ(j["cells"][1]["status"], "FAIL");
  EXPECT_EQ(j["cells"][1]["reason"], "min_psnr 23.1 < 30");
}

TEST(JsonReportTest, ErrorsNameThePlace) {
  json j = RunRecordToJson(SampleRun());
  j["run"].erase("host");
  StatusOr<RunRecord> r = RunRecordFromJson(j);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kInvalidInput);
  EXPECT_NE(r.status().message().find("run: "), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("host"), std::string::npos) << r.status().message();

  j = RunRecordToJson(SampleRun());
  j["cells"][2]["status"] = "SORT_OF";
  r = RunRecordFromJson(j);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "cells[2]: unknown status 'SORT_OF'");

  j = RunRecordToJson(SampleRun());
  j["format_version"] = kRunJsonFormatVersion + 1;
  EXPECT_EQ(RunRecordFromJson(j).status().code(), Status::Code::kUnsupported);
}

TEST(JsonReportTest, FileErrorsNameThePath) {
  const std::string dir = FreshDir("json_errors");
  StatusOr<RunRecord> r = ReadJsonReport(dir + "/missing.json");
  EXPECT_EQ(r.status().code(), Status::Code::kNotFound);
  std::ofstream(dir + "/bad.json") << "{\"format\": ";
  r = ReadJsonReport(dir + "/bad.json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message().rfind(dir + "/bad.json: not JSON", 0), 0u) << r.status().message();
  EXPECT_EQ(r.status().message().find('\n'), std::string::npos);
  EXPECT_EQ(WriteJsonReport(SampleRun(), dir + "/no/such/folder/run.json").code(), Status::Code::kIoError);
}

}  // namespace
}  // namespace framegate
