// store_bench: the SQLite results store at fleet scale (docs/store.md has the table).
//
// Before the benchmarks run, a synthetic year of nightly history is built once into a
// file and reused by later runs (building it takes minutes on a 2-core machine):
//   RUNS nights x GPUS devices (cuda:0..GPUS-1, five GPU models) x CELLS cells,
//   default 365 x 100 x 200 = 7.3M cells, each with its metrics row and 3 timing repeats
//   (no per-frame, per-step or probe samples: see BM_Insert for cells that have them),
//   inserted 2,000 cells per transaction. Planted in it: cell 7 failing on the L4s for
//   the last 5 nights, cell 11 20% slower everywhere for the last 3 nights, cell 13
//   flaky on the H100s since night 300.
// Benchmarks (wall time):
//   BM_Insert/<shape>/<batch>  cells/s into a fresh file: shape full (8 frames, 8 steps,
//                              5 repeats, 2 probes: what the runner writes) or history;
//                              batch = cells per transaction (1: the runner's pattern)
//   BM_History/<limit>         ResultStore::CellHistory of one cell (a different one each
//                              iteration), `framegate history`'s query
//   BM_Regressions/<days>/<packed>
//                              FindRegressions over the last <days> days (14: the default);
//                              packed 0 reads a copy of the history without packed_points
//                              (FILE.rows.db, copied again by each process that runs
//                              one), as a store whose runs are unfinished or older than
//                              schema 11 is read
//   BM_Compare                 CompareRuns of the last two nights (all their cells)
// Environment: FRAMEGATE_STORE_BENCH_DB (default /tmp/framegate-store-bench-year.db),
// FRAMEGATE_STORE_BENCH_RUNS / _GPUS / _CELLS (default 365 / 100 / 200).
#include <benchmark/benchmark.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>

#include "store/regressions.h"
#include "store/result_store.h"
#include "store/run_compare.h"
#include "store/synthetic_results.h"

namespace framegate {
namespace {

int EnvInt(const char* name, int fallback) {
  const char* value = std::getenv(name);
  return value ? std::atoi(value) : fallback;
}

const std::string& HistoryPath() {
  static const std::string path = std::getenv("FRAMEGATE_STORE_BENCH_DB")
                                      ? std::getenv("FRAMEGATE_STORE_BENCH_DB")
                                      : "/tmp/framegate-store-bench-year.db";
  return path;
}
const int kRuns = EnvInt("FRAMEGATE_STORE_BENCH_RUNS", 365);
const int kGpus = EnvInt("FRAMEGATE_STORE_BENCH_GPUS", 100);
const int kCells = EnvInt("FRAMEGATE_STORE_BENCH_CELLS", 200);
const char* const kModels[] = {"NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", "NVIDIA L4", "NVIDIA L40S",
                               "NVIDIA RTX 6000 Ada Generation"};
constexpr SyntheticShape kHistoryShape{0, 0, 3, 0};

std::string Day(int night) {
  std::tm tm{};
  tm.tm_year = 123;  // 2023
  tm.tm_mday = 1 + night;
  tm.tm_hour = 2;
  const std::time_t t = timegm(&tm);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
  return text;
}

std::string NightId(int night) {
  char id[32];
  std::snprintf(id, sizeof(id), "night-%03d", night);
  return id;
}

CellResult HistoryCell(int night, int gpu, int cell) {
  CellResult r =
      SyntheticCellResult(cell, "cuda:" + std::to_string(gpu), static_cast<uint64_t>(night), kHistoryShape);
  const std::string model = kModels[gpu % 5];
  if ((cell == 7 && model == "NVIDIA L4" && night >= kRuns - 5) ||
      (cell == 13 && gpu % 5 == 0 && night >= 300 && night % 2)) {
    r.status = CellStatus::kFail;
    r.reason = "min_psnr 21.3 < 30";
  }
  if (cell == 11 && night >= kRuns - 3) {
    for (double& s : r.timings.generation_seconds) s *= 1.2;
  }
  return r;
}

int64_t FileBytes(const std::string& path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0 ? info.st_size : 0;
}

// Builds the year of history unless the file already holds it.
bool EnsureHistory() {
  StatusOr<std::unique_ptr<ResultStore>> store = ResultStore::Open(HistoryPath());
  if (!store.ok()) return std::cerr << store.status().message() << "\n", false;
  StatusOr<std::vector<RunInfo>> runs = (*store)->ListRuns();
  if (runs.ok() && static_cast<int>(runs->size()) == kRuns && runs->back().state == "finished") {
    return true;
  }
  const auto start = std::chrono::steady_clock::now();
  std::vector<DeviceInfo> devices;
  for (int g = 0; g < kGpus; ++g) {
    devices.push_back({"cuda:" + std::to_string(g), kModels[g % 5], "9.0", 80ll << 30, "550.54"});
  }
  for (int night = runs.ok() ? static_cast<int>(runs->size()) : 0; night < kRuns; ++night) {
    RunInfo info = SyntheticRunInfo(NightId(night), Day(night));
    info.git_sha = "sha-week-" + std::to_string(night / 7);
    if (!(*store)->BeginRun(info, devices).ok()) return false;
    std::vector<CellResult> batch;
    for (int g = 0; g < kGpus; ++g) {
      for (int c = 0; c < kCells; ++c) batch.push_back(HistoryCell(night, g, c));
      if (batch.size() >= 2000 || g == kGpus - 1) {
        Status s = (*store)->RecordCells(info.run_id, batch);
        if (!s.ok()) return std::cerr << s.message() << "\n", false;
        batch.clear();
      }
    }
    if (!(*store)->FinishRun(info.run_id, "finished", Day(night)).ok()) return false;
    if (night % 10 == 9 || night == kRuns - 1) {
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::cerr << "history: " << night + 1 << "/" << kRuns << " nights, "
                << static_cast<int64_t>((night + 1.0) * kGpus * kCells / s) << " cells/s, "
                << FileBytes(HistoryPath()) / (1 << 20) << " MiB\n";
    }
  }
  return true;
}

ResultStore& History() {
  static std::unique_ptr<ResultStore> store =
      std::move(*ResultStore::Open(HistoryPath(), ResultStore::OpenMode::kExisting));
  return *store;
}

void BM_Insert(benchmark::State& state) {
  const bool full = state.range(0) == 1;
  const int batch = static_cast<int>(state.range(1));
  const std::string path = "/tmp/framegate-store-bench-insert-" + std::to_string(getpid()) + ".db";
  auto store = std::move(*ResultStore::Open(path));
  (void)store->BeginRun(SyntheticRunInfo("insert", Day(0)), {});
  std::vector<CellResult> cells;
  for (int i = 0; i < 1000; ++i) {
    cells.push_back(
        SyntheticCellResult(i, "cuda:" + std::to_string(i % 8), 1, full ? SyntheticShape{} : kHistoryShape));
  }
  int64_t written = 0;
  for (auto _ : state) {
    for (size_t i = 0; i < cells.size(); i += static_cast<size_t>(batch)) {
      std::vector<CellResult> chunk(cells.begin() + static_cast<long>(i),
                                    cells.begin() + static_cast<long>(i + batch));
      for (CellResult& c : chunk) c.cell.seed = static_cast<uint64_t>(written++);  // new ids
      if (!store->RecordCells("insert", chunk).ok()) state.SkipWithError("insert failed");
    }
  }
  state.counters["cells/s"] = benchmark::Counter(static_cast<double>(written), benchmark::Counter::kIsRate);
  state.counters["bytes/cell"] =
      static_cast<double>(FileBytes(path) + FileBytes(path + "-wal")) / static_cast<double>(written);
  store.reset();
  for (const char* suffix : {"", "-wal", "-shm"}) std::remove((path + suffix).c_str());
}
BENCHMARK(BM_Insert)
    ->ArgNames({"full", "batch"})
    ->Args({1, 1000})
    ->Args({0, 1000})
    ->Args({1, 1})
    ->Iterations(5)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_History(benchmark::State& state) {
  int cell = 0;
  for (auto _ : state) {
    const std::string id = HistoryCell(0, cell % kGpus, (cell * 37) % kCells).cell.Id();
    ++cell;
    StatusOr<std::vector<HistoryPoint>> points = History().CellHistory(id, static_cast<int>(state.range(0)));
    if (!points.ok() || points->empty()) state.SkipWithError("no history");
  }
}
BENCHMARK(BM_History)->Arg(30)->Arg(400)->Iterations(20)->Unit(benchmark::kMillisecond)->UseRealTime();

// The history with its packed_points rows deleted: `regressions` scans series_points.
ResultStore& HistoryWithoutPacks() {
  static std::unique_ptr<ResultStore> store = [] {
    const std::string path = HistoryPath() + ".rows.db";
    std::remove(path.c_str());
    // A byte copy (after a checkpoint): the rows keep the pages they have in the history.
    (void)History().db().Exec("PRAGMA wal_checkpoint(TRUNCATE)");
    std::error_code error;
    std::filesystem::copy_file(HistoryPath(), path, std::filesystem::copy_options::overwrite_existing, error);
    if (error) std::cerr << "cannot copy to " << path << ": " << error.message() << "\n";
    std::unique_ptr<ResultStore> rows = std::move(*ResultStore::Open(path, ResultStore::OpenMode::kExisting));
    (void)rows->db().Exec("DELETE FROM packed_points");
    return rows;
  }();
  return *store;
}

void BM_Regressions(benchmark::State& state) {
  ResultStore& store = state.range(1) ? History() : HistoryWithoutPacks();
  RegressionOptions options;
  char since[16];
  std::snprintf(since, sizeof(since), "%.10s", Day(kRuns - static_cast<int>(state.range(0))).c_str());
  options.since = since;
  int regressions = 0, flaky = 0, series = 0;
  for (auto _ : state) {
    StatusOr<RegressionReport> report = FindRegressions(store, options);
    if (!report.ok()) state.SkipWithError(report.status().message().c_str());
    regressions = report->regressions();
    flaky = static_cast<int>(report->flaky.size());
    series = report->series;
  }
  state.counters["regressions"] = regressions;
  state.counters["flaky"] = flaky;
  state.counters["series"] = series;
}
BENCHMARK(BM_Regressions)
    ->ArgNames({"days", "packed"})
    ->ArgsProduct({{14, 30, 7}, {1, 0}})
    ->Iterations(5)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_Compare(benchmark::State& state) {
  for (auto _ : state) {
    StatusOr<RunComparison> c =
        CompareRuns(History(), NightId(kRuns - 6), NightId(kRuns - 1), CompareOptions());
    if (!c.ok()) state.SkipWithError(c.status().message().c_str());
    state.counters["regressions"] = c->regressions();
  }
}
BENCHMARK(BM_Compare)->Iterations(3)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace framegate

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (!framegate::EnsureHistory()) return 2;
  const std::string& path = framegate::HistoryPath();
  std::cerr << "history: " << path << ", " << framegate::kRuns << " x " << framegate::kGpus << " x "
            << framegate::kCells << " cells, "
            << (framegate::FileBytes(path) + framegate::FileBytes(path + "-wal")) / (1 << 20) << " MiB\n";
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
