#include "reports/benchmark_json.h"

#include <gtest/gtest.h>

#include "reports/report_test_data.h"

namespace framegate {
namespace {

using nlohmann::json;
using testing_data::SampleRun;

TEST(BenchmarkJsonTest, NameFollowsTheCell) {
  Cell cell;
  cell.policy = "fp16";
  EXPECT_EQ(BenchmarkName(cell), "reference:tiny/cpu/fp16/seed0");
  cell.fault = "f2";
  cell.steps = 4;
  EXPECT_EQ(BenchmarkName(cell), "reference:tiny/cpu/fp16/seed0/fault:f2/steps:4");
}

TEST(BenchmarkJsonTest, RepeatsThenAggregatesPerCell) {
  const json j = BenchmarkJson(SampleRun());
  EXPECT_EQ(j["context"]["host_name"], "nightly-01");
  EXPECT_EQ(j["context"]["date"], "2025-01-01T02:00:00Z");
  const json& b = j["benchmarks"];
  // PASS: 3 repeats + mean/median/stddev; FAIL: 1 repeat, no aggregates; others: no timings.
  ASSERT_EQ(b.size(), 7u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(b[i]["name"], "reference:tiny/cpu/fp32/seed0");
    EXPECT_EQ(b[i]["run_type"], "iteration");
    EXPECT_EQ(b[i]["repetition_index"], i);
    EXPECT_EQ(b[i]["repetitions"], 3);
    EXPECT_EQ(b[i]["time_unit"], "ms");
    EXPECT_EQ(b[i]["real_time"], b[i]["cpu_time"]);
  }
  EXPECT_DOUBLE_EQ(b[1]["real_time"].get<double>(), 1000.0);
  const char* names[] = {"mean", "median", "stddev"};
  const double values[] = {1200.0, 1200.0, 200.0};
  for (int k = 0; k < 3; ++k) {
    const json& a = b[3 + k];
    EXPECT_EQ(a["name"], std::string("reference:tiny/cpu/fp32/seed0_") + names[k]);
    EXPECT_EQ(a["run_name"], "reference:tiny/cpu/fp32/seed0");
    EXPECT_EQ(a["run_type"], "aggregate");
    EXPECT_EQ(a["aggregate_name"], names[k]);
    EXPECT_EQ(a["family_index"], 0);
    EXPECT_NEAR(a["real_time"].get<double>(), values[k], 1e-9);
  }
  EXPECT_EQ(b[6]["name"], "reference:tiny/cpu/bf16/seed0");
  EXPECT_EQ(b[6]["family_index"], 1);
  EXPECT_EQ(b[6]["label"], "FAIL");
}

}  // namespace
}  // namespace framegate
