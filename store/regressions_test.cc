#include "store/regressions.h"

#include <gtest/gtest.h>

#include <cstdio>

#include "store/regression_accept.h"
#include "store/regression_points.h"
#include "store/synthetic_results.h"
#include "store/test_db.h"

namespace framegate {
namespace {

constexpr int kNights = 10;
const std::vector<DeviceInfo> kDevices = {{"cuda:0", "NVIDIA L4", "8.9", 0, ""},
                                          {"cuda:1", "NVIDIA H100", "9.0", 0, ""}};

std::string NightId(int night) { return "night-" + std::to_string(night); }

// The history the tests judge, ten nights, two GPU models, one cell family per seed:
//   seed 0: FAIL on the L4 for the last 3 nights, fine on the H100
//   seed 1: FAIL on the L4 on the last night only (pending)
//   seed 2: 20% slower on both models for the last 3 nights
//   seed 3: latency creeping up 3% at night 3 and 3% at night 6 (each below 5%)
//   seed 4: PASS/FAIL alternating on the L4 with one git sha (flaky)
//   seed 5: FAIL on every night (not a new regression)
CellResult NightResult(int seed, int device, int night) {
  CellResult r = SyntheticCellResult(seed, "cuda:" + std::to_string(device), 0);
  double latency = 0.5 * (1 + 0.001 * ((night * 7 + seed) % 3 - 1));  // +-0.1% jitter
  const bool l4 = device == 0;
  if ((seed == 0 && l4 && night >= kNights - 3) || (seed == 1 && l4 && night == kNights - 1) ||
      (seed == 4 && l4 && night % 2 == 1) || seed == 5) {
    r.status = CellStatus::kFail;
    r.reason = "min_psnr 21 < 30";
  }
  if (seed == 2 && night >= kNights - 3) latency *= 1.2;
  if (seed == 3) latency *= 1 + 0.03 * (night >= 3) + 0.03 * (night >= 6);
  r.timings.generation_seconds = {latency, latency, latency};
  return r;
}

class RegressionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto opened = ResultStore::Open(file_.path());
    ASSERT_TRUE(opened.ok());
    store_ = std::move(*opened);
    for (int night = 0; night < kNights; ++night) {
      RunInfo info = SyntheticRunInfo(NightId(night), "2024-05-1" + std::to_string(night) + "T03:00:00Z");
      if (night == 2) info.tags = "nightly,release-1.0";
      ASSERT_TRUE(store_->BeginRun(info, kDevices).ok());
      std::vector<CellResult> cells;
      for (int seed = 0; seed < 6; ++seed) {
        for (int device = 0; device < 2; ++device) cells.push_back(NightResult(seed, device, night));
      }
      ASSERT_TRUE(store_->RecordCells(info.run_id, cells).ok());
    }
  }

  const RegressionFinding* Find(const RegressionReport& r, const std::string& kind, const std::string& track,
                                int seed, bool pending = false) {
    for (const RegressionFinding& f : r.findings) {
      if (f.kind == kind && f.track == track && f.pending == pending &&
          f.family == "reference:tiny cuda " + SyntheticCellResult(seed, "x", 0).cell.policy +
                          " seed=" + std::to_string(seed)) {
        return &f;
      }
    }
    return nullptr;
  }

  TestDb file_{"regressions"};
  std::unique_ptr<ResultStore> store_;
};

TEST_F(RegressionsTest, FlagsSustainedFailuresOnOneModelAsOneLine) {
  StatusOr<RegressionReport> r = FindRegressions(*store_, RegressionOptions());
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->runs, kNights);
  const RegressionFinding* f = Find(*r, "failing", "status", 0);
  ASSERT_NE(f, nullptr) << FormatRegressions(*r);
  EXPECT_EQ(f->models, std::vector<std::string>{"NVIDIA L4"});
  EXPECT_EQ(f->clean_models, std::vector<std::string>{"NVIDIA H100"});
  EXPECT_EQ(f->consecutive, 3);
  EXPECT_EQ(f->since_run, NightId(kNights - 3));
  EXPECT_EQ(f->last_status, "FAIL");
  EXPECT_EQ(f->last_reason, "min_psnr 21 < 30");
  EXPECT_NE(FormatRegressions(*r).find("on NVIDIA L4 only (not on: NVIDIA H100)"), std::string::npos);
}

TEST_F(RegressionsTest, OneViolationIsPendingAndFailingAllAlongIsNotNew) {
  StatusOr<RegressionReport> r = FindRegressions(*store_, RegressionOptions());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Find(*r, "failing", "status", 1), nullptr);
  EXPECT_NE(Find(*r, "failing", "status", 1, /*pending=*/true), nullptr);
  EXPECT_EQ(Find(*r, "failing", "status", 5), nullptr);
  EXPECT_EQ(Find(*r, "failing", "status", 5, true), nullptr);
}

TEST_F(RegressionsTest, FlagsLatencyJumpsAndCreepingLatency) {
  RegressionOptions options;
  options.min_effect = 0.05;  // each 3% step of seed 3 alone is below it
  StatusOr<RegressionReport> r = FindRegressions(*store_, options);
  ASSERT_TRUE(r.ok());
  const RegressionFinding* slower = Find(*r, "worse", "latency_median_s", 2);
  ASSERT_NE(slower, nullptr) << FormatRegressions(*r);
  EXPECT_EQ(slower->models.size(), 2u);
  EXPECT_TRUE(slower->clean_models.empty());
  EXPECT_NEAR(slower->current / slower->baseline, 1.2, 0.01);
  const RegressionFinding* creeping = Find(*r, "creeping", "latency_median_s", 3);
  ASSERT_NE(creeping, nullptr) << FormatRegressions(*r);
  ASSERT_EQ(creeping->steps.size(), 2u);
  EXPECT_EQ(creeping->steps[0].run_id, NightId(3));
  EXPECT_EQ(creeping->steps[1].run_id, NightId(6));
  EXPECT_NEAR(creeping->current / creeping->baseline, 1.06, 0.003);
  EXPECT_EQ(Find(*r, "worse", "latency_median_s", 3), nullptr);  // no single step is enough
  // With the default floor (1%) the newest 3% step is itself a confirmed shift.
  r = FindRegressions(*store_, RegressionOptions());
  ASSERT_TRUE(r.ok());
  EXPECT_NE(Find(*r, "worse", "latency_median_s", 3), nullptr) << FormatRegressions(*r);
}

// One series per seed (`seeds` of them, recorded in seed order) on one device, `nights`
// nights of 0.5 s +-0.2% jitter; `change` edits night n's run and result.
template <typename Change>
std::unique_ptr<ResultStore> History(const TestDb& file, int nights, Change change, int seeds = 3) {
  auto opened = ResultStore::Open(file.path());
  EXPECT_TRUE(opened.ok());
  std::unique_ptr<ResultStore> store = std::move(*opened);
  for (int night = 0; night < nights; ++night) {
    char day[32];
    std::snprintf(day, sizeof day, "2024-06-%02dT03:00:00Z", night + 1);
    RunInfo info = SyntheticRunInfo(NightId(night), day);
    info.git_sha = "sha" + std::to_string(night);  // a new commit every night
    std::vector<CellResult> cells;
    for (int seed = 0; seed < seeds; ++seed) {
      CellResult r = SyntheticCellResult(seed, "cuda:0", 0);
      const double latency = 0.5 * (1 + 0.002 * ((night * 5 + seed) % 3 - 1));
      r.timings.generation_seconds = {latency, latency, latency};
      change(night, seed, &info, &r);
      cells.push_back(r);
    }
    EXPECT_TRUE(store->BeginRun(info, {kDevices[0]}).ok());
    EXPECT_TRUE(store->RecordCells(info.run_id, cells).ok());
  }
  return store;
}

// The first alert of the cell's track (of that kind, when given).
const SeriesAlert* AlertOf(const RegressionReport& r, const std::string& cell_id, const std::string& track,
                           const std::string& kind = "") {
  for (const SeriesAlert& a : r.alerts) {
    if (a.cell_id == cell_id && a.track == track && (kind.empty() || a.kind == kind)) return &a;
  }
  return nullptr;
}

void Scale(CellResult* r, double factor) {
  for (double& t : r->timings.generation_seconds) t *= factor;
}

TEST(RegressionAlertsTest, AChangeWhereTheEnvironmentChangedIsEnvironmentNotARegression) {
  // Night 8 on: LibTorch 2.6 and 30% slower (seed 0), 20% faster (seed 1); seed 2 unmoved.
  TestDb file("alerts-env");
  auto store = History(file, 11, [](int night, int seed, RunInfo* info, CellResult* r) {
    if (night < 8) return;
    info->libtorch_version = "2.6.0";
    if (seed == 0) Scale(r, 1.3);
    if (seed == 1) Scale(r, 0.8);
  });
  StatusOr<RegressionReport> r = FindRegressions(*store, RegressionOptions());
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->regressions(), 0) << FormatRegressions(*r);
  const SeriesAlert* slower = AlertOf(*r, SyntheticCellResult(0, "cuda:0", 0).cell.Id(), "latency_median_s");
  ASSERT_NE(slower, nullptr) << FormatRegressions(*r);
  EXPECT_EQ(slower->kind, "environment");
  EXPECT_EQ(slower->since_run, NightId(8));
  EXPECT_EQ(slower->changed, std::vector<std::string>{"libtorch_version: 1.13.0 -> 2.6.0"});
  const SeriesAlert* faster = AlertOf(*r, SyntheticCellResult(1, "cuda:0", 0).cell.Id(), "latency_median_s");
  ASSERT_NE(faster, nullptr);
  EXPECT_EQ(faster->kind, "environment");
  EXPECT_EQ(AlertOf(*r, SyntheticCellResult(2, "cuda:0", 0).cell.Id(), "latency_median_s"), nullptr);
  // The same change without the environment change is a confirmed regression.
  TestDb code_file("alerts-code");
  store = History(code_file, 11, [](int night, int seed, RunInfo*, CellResult* r) {
    if (night >= 8 && seed == 0) Scale(r, 1.3);
  });
  r = FindRegressions(*store, RegressionOptions());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->regressions(), 1) << FormatRegressions(*r);
  slower = AlertOf(*r, SyntheticCellResult(0, "cuda:0", 0).cell.Id(), "latency_median_s");
  ASSERT_NE(slower, nullptr);
  EXPECT_EQ(slower->kind, "regression");
  EXPECT_TRUE(slower->confirmed);
  EXPECT_EQ(slower->nights, 3);
  EXPECT_NEAR(slower->relative, 0.3, 0.01);
  EXPECT_GT(slower->confidence, 0.99);
}

TEST(RegressionAlertsTest, AnEnvironmentChangeIsTestedOnItsOwnNight) {
  // LibTorch 2.6 on the newest night only, seed 0 30% slower: environment from that one
  // night (the night is known), not a pending regression.
  TestDb file("alerts-env-night");
  auto store = History(file, 7, [](int night, int seed, RunInfo* info, CellResult* r) {
    if (night < 6) return;
    info->libtorch_version = "2.6.0";
    if (seed == 0) Scale(r, 1.3);
  });
  StatusOr<RegressionReport> r = FindRegressions(*store, RegressionOptions());
  ASSERT_TRUE(r.ok()) << r.status().message();
  const std::string cell = SyntheticCellResult(0, "cuda:0", 0).cell.Id();
  const SeriesAlert* slower = AlertOf(*r, cell, "latency_median_s");
  ASSERT_NE(slower, nullptr) << FormatRegressions(*r);
  EXPECT_EQ(slower->kind, "environment");
  EXPECT_EQ(slower->change, "worse");
  EXPECT_EQ(slower->nights, 1);
  EXPECT_TRUE(slower->confirmed);
  EXPECT_EQ(slower->changed, std::vector<std::string>{"libtorch_version: 1.13.0 -> 2.6.0"});
  EXPECT_EQ(AlertOf(*r, SyntheticCellResult(1, "cuda:0", 0).cell.Id(), "latency_median_s"), nullptr);
}

TEST(RegressionAlertsTest, ACodeChangeAfterAnEnvironmentChangeIsJudgedInTheNewEnvironment) {
  // LibTorch 2.6 from night 4 (seed 0 and 1: 30% slower), then seed 0 30% slower again
  // from night 10 (the code): one environment change each, one regression for seed 0's
  // second step, measured against the new environment's level.
  TestDb file("alerts-env-then-code");
  auto store = History(file, 15, [](int night, int seed, RunInfo* info, CellResult* r) {
    if (night < 4) return;
    info->libtorch_version = "2.6.0";
    if (seed < 2) Scale(r, 1.3);
    if (seed == 0 && night >= 10) Scale(r, 1.3);
  });
  StatusOr<RegressionReport> r = FindRegressions(*store, RegressionOptions());
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->regressions(), 1) << FormatRegressions(*r);
  const std::string cell = SyntheticCellResult(0, "cuda:0", 0).cell.Id();
  const SeriesAlert* code = AlertOf(*r, cell, "latency_median_s", "regression");
  ASSERT_NE(code, nullptr) << FormatRegressions(*r);
  EXPECT_TRUE(code->confirmed);
  EXPECT_EQ(code->since_run, NightId(10));
  EXPECT_NEAR(code->relative, 0.3, 0.01);
  const SeriesAlert* environment = AlertOf(*r, cell, "latency_median_s", "environment");
  ASSERT_NE(environment, nullptr);
  EXPECT_EQ(environment->since_run, NightId(4));
  const SeriesAlert* other =
      AlertOf(*r, SyntheticCellResult(1, "cuda:0", 0).cell.Id(), "latency_median_s", "environment");
  ASSERT_NE(other, nullptr);
  EXPECT_NEAR(other->relative, 0.3, 0.01);
  EXPECT_EQ(other->nights, 11);
}

TEST(RegressionAlertsTest, TheEnvironmentTestTakesTheLoadOfTheCellsRecordedNextToTheCell) {
  // Ten cells a night; on every other night the load arrives halfway through: the last
  // five cells recorded run 1.6x slower. LibTorch 2.6 from night 9, and seed 8 (among the
  // five) 30% slower with it. Its neighbours carry the same load, so the 30% stands out;
  // one load factor for the whole run would leave +-23% alternating on the cell.
  TestDb file("alerts-load");
  auto store = History(
      file, 12,
      [](int night, int seed, RunInfo* info, CellResult* r) {
        if (night % 2 == 1 && seed >= 5) Scale(r, 1.6);
        if (night < 9) return;
        info->libtorch_version = "2.6.0";
        if (seed == 8) Scale(r, 1.3);
      },
      10);
  StatusOr<RegressionReport> r = FindRegressions(*store, RegressionOptions());
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->regressions(), 0) << FormatRegressions(*r);
  const SeriesAlert* slower = AlertOf(*r, SyntheticCellResult(8, "cuda:0", 0).cell.Id(), "latency_median_s");
  ASSERT_NE(slower, nullptr) << FormatRegressions(*r);
  EXPECT_EQ(slower->kind, "environment");
  EXPECT_EQ(slower->since_run, NightId(9));
  EXPECT_NEAR(slower->relative, 0.3, 0.02);
}

TEST(RegressionAlertsTest, OneNightOutliersAndImprovementsAreNotRegressions) {
  TestDb file("alerts-outlier");
  auto store = History(file, 11, [](int night, int seed, RunInfo*, CellResult* r) {
    if (seed == 0 && night == 9) Scale(r, 2.0);   // one slow night, then back
    if (seed == 1 && night >= 8) Scale(r, 0.7);   // faster from night 8
    if (seed == 2 && night == 10) Scale(r, 1.5);  // the newest night only: pending
  });
  StatusOr<RegressionReport> r = FindRegressions(*store, RegressionOptions());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->regressions(), 0) << FormatRegressions(*r);
  EXPECT_EQ(AlertOf(*r, SyntheticCellResult(0, "cuda:0", 0).cell.Id(), "latency_median_s"), nullptr);
  const SeriesAlert* faster = AlertOf(*r, SyntheticCellResult(1, "cuda:0", 0).cell.Id(), "latency_median_s");
  ASSERT_NE(faster, nullptr);
  EXPECT_EQ(faster->kind, "improvement");
  const SeriesAlert* newest = AlertOf(*r, SyntheticCellResult(2, "cuda:0", 0).cell.Id(), "latency_median_s");
  ASSERT_NE(newest, nullptr);
  EXPECT_FALSE(newest->confirmed);
}

TEST(RegressionAlertsTest, AnAcceptedChangeIsTheNewBaseline) {
  // Seed 0 30% slower from night 4; accepted at night 4; then 30% slower again from
  // night 12: only the second change is a regression, judged against the accepted level.
  TestDb file("alerts-accept");
  auto store = History(file, 15, [](int night, int seed, RunInfo*, CellResult* r) {
    if (seed == 0 && night >= 4) Scale(r, 1.3);
    if (seed == 0 && night >= 12) Scale(r, 1.3);
  });
  const std::string cell = SyntheticCellResult(0, "cuda:0", 0).cell.Id();
  Acceptance a{cell, NightId(4), "", "2024-06-06T09:00:00Z", "alice", "new attention kernel: slower, exact"};
  StatusOr<Acceptance> recorded = RecordAcceptance(store->db(), a);
  ASSERT_TRUE(recorded.ok()) << recorded.status().message();
  EXPECT_EQ(recorded->since_started_at, "2024-06-05T03:00:00Z");
  StatusOr<RegressionReport> r = FindRegressions(*store, RegressionOptions());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->accepted, 1);
  const SeriesAlert* slower = AlertOf(*r, cell, "latency_median_s");
  ASSERT_NE(slower, nullptr) << FormatRegressions(*r);
  EXPECT_EQ(slower->since_run, NightId(12));
  EXPECT_NEAR(slower->relative, 0.3, 0.01);  // against the accepted level, not +69%
  // Unknown runs and cells are refused; nothing is stored.
  a.since_run = "no-such-run";
  EXPECT_EQ(RecordAcceptance(store->db(), a).status().code(), Status::Code::kInvalidInput);
  a.since_run = NightId(4);
  a.cell_id = "ffffffffffffffff";
  EXPECT_EQ(RecordAcceptance(store->db(), a).status().code(), Status::Code::kInvalidInput);
  StatusOr<std::vector<Acceptance>> all = LoadAcceptances(store->db());
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].accepted_by, "alice");
  EXPECT_EQ((*all)[0].reason, "new attention kernel: slower, exact");
}

TEST_F(RegressionsTest, FlakyCellsAreListedApart) {
  StatusOr<RegressionReport> r = FindRegressions(*store_, RegressionOptions());
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->flaky.size(), 1u);
  EXPECT_EQ(r->flaky[0].model, "NVIDIA L4");
  EXPECT_EQ(r->flaky[0].statuses, "PFPFPFPFPF");
  EXPECT_EQ(r->flaky[0].flips, 9);
  EXPECT_EQ(Find(*r, "failing", "status", 4), nullptr);
  EXPECT_EQ(Find(*r, "failing", "status", 4, true), nullptr);
  EXPECT_EQ(r->regressions(), 3);  // seed 0 failing, seed 2 slower, seed 3 creeping
}

TEST_F(RegressionsTest, TheSeriesJudgedOnSeveralThreadsGiveTheSameReport) {
  RegressionOptions one;
  one.judge_threads = 1;
  StatusOr<RegressionReport> serial = FindRegressions(*store_, one);
  ASSERT_TRUE(serial.ok());
  ASSERT_EQ(serial->regressions(), 3);
  for (int threads : {2, 5, 40}) {  // 40: more threads than series (one each)
    RegressionOptions many;
    many.judge_threads = threads;
    StatusOr<RegressionReport> parallel = FindRegressions(*store_, many);
    ASSERT_TRUE(parallel.ok());
    EXPECT_EQ(RegressionsToJson(*parallel).dump(), RegressionsToJson(*serial).dump()) << threads;
  }
}

TEST_F(RegressionsTest, BaselineRunTagAndWindow) {
  RegressionOptions options;
  options.baseline = NightId(5);
  StatusOr<RegressionReport> r = FindRegressions(*store_, options);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_NE(Find(*r, "failing", "status", 0), nullptr);
  options.baseline = "release-1.0";
  r = FindRegressions(*store_, options);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const RegressionFinding* creeping = Find(*r, "worse", "latency_median_s", 3);
  ASSERT_NE(creeping, nullptr) << FormatRegressions(*r);  // +6% against the release
  options = RegressionOptions();
  options.since = "2024-05-18";  // the last two nights only
  r = FindRegressions(*store_, options);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->runs, 2);
  EXPECT_EQ(Find(*r, "failing", "status", 0), nullptr);  // failing all along this window
}

TEST(RegressionsOrderTest, RunsRecordedOutOfTimeOrderAreJudgedInTimeOrder) {
  // A merged store can hold runs in any order of writing; the series must still be in
  // started_at order: recording nights newest first finds the same regression.
  TestDb file("regressions-order");
  auto store = ResultStore::Open(file.path());
  ASSERT_TRUE(store.ok());
  for (int night = kNights - 1; night >= 0; --night) {
    RunInfo info = SyntheticRunInfo(NightId(night), "2024-05-1" + std::to_string(night) + "T03:00:00Z");
    ASSERT_TRUE((*store)->BeginRun(info, kDevices).ok());
    ASSERT_TRUE(
        (*store)->RecordCells(info.run_id, {NightResult(0, 0, night), NightResult(0, 1, night)}).ok());
  }
  StatusOr<RegressionReport> r = FindRegressions(**store, RegressionOptions());
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->regressions(), 1) << FormatRegressions(*r);
  EXPECT_EQ(r->findings[0].track, "status");
  EXPECT_EQ(r->findings[0].since_run, NightId(kNights - 3));
  EXPECT_EQ(r->findings[0].consecutive, 3);
}

TEST_F(RegressionsTest, BadSinceAndUnknownBaselineAreInvalidInput) {
  RegressionOptions options;
  options.since = "last tuesday";
  EXPECT_EQ(FindRegressions(*store_, options).status().code(), Status::Code::kInvalidInput);
  options = RegressionOptions();
  options.baseline = "no-such-run-or-tag";
  StatusOr<RegressionReport> r = FindRegressions(*store_, options);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no-such-run-or-tag"), std::string::npos);
}

TEST(SeriesPointArrayTest, AFleetWindowsPointsAreDefaultPointsOnTwoMiBBoundaries) {
  for (size_t count : {size_t{0}, size_t{3}, size_t{300000}}) {  // 300k: a 14-day window, ~19 MB
    SeriesPointArray points = AllocateSeriesPoints(count);
    ASSERT_NE(points.get(), nullptr);
    if (count * sizeof(SeriesPoint) >= (size_t{2} << 20)) {
      EXPECT_EQ(reinterpret_cast<uintptr_t>(points.get()) % (size_t{2} << 20), 0u);
    }
    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(points[i].load, 1.0);
      ASSERT_EQ(points[i].run, 0);
    }
    if (count > 0) points[count - 1].latency = 2;  // writable to the end (ASan)
  }
}

}  // namespace
}  // namespace framegate
