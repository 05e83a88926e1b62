#include "store/store_merge.h"

#include <sys/stat.h>

#include <map>

#include "harness/cell_result_json.h"
#include "harness/qualification_json.h"
#include "store/run_rows.h"
#include "store/schema_check.h"

namespace framegate {
namespace {

bool SameFile(const std::string& a, const std::string& b) {
  struct stat sa, sb;
  return stat(a.c_str(), &sa) == 0 && stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}

// The first RunInfo field that differs, "" when none but state/finished_at do.
std::string ProvenanceDifference(const RunInfo& a, const RunInfo& b) {
  const std::pair<const char*, std::pair<const std::string*, const std::string*>> fields[] = {
      {"started_at", {&a.started_at, &b.started_at}},
      {"host", {&a.host, &b.host}},
      {"git_sha", {&a.git_sha, &b.git_sha}},
      {"framegate_version", {&a.framegate_version, &b.framegate_version}},
      {"libtorch_version", {&a.libtorch_version, &b.libtorch_version}},
      {"cuda_version", {&a.cuda_version, &b.cuda_version}},
      {"blas", {&a.blas, &b.blas}},
      {"tags", {&a.tags, &b.tags}},
      {"matrix_path", {&a.matrix_path, &b.matrix_path}},
      {"matrix_sha256", {&a.matrix_sha256, &b.matrix_sha256}},
      {"command", {&a.command, &b.command}},
      {"shard", {&a.shard, &b.shard}}};
  for (const auto& [name, values] : fields) {
    if (*values.first != *values.second) {
      return std::string(name) + " '" + *values.first + "' vs '" + *values.second + "'";
    }
  }
  return "";
}

// "status \"PASS\" vs \"FAIL\"": the first top-level key whose values differ.
std::string FirstDifference(const nlohmann::json& a, const nlohmann::json& b) {
  for (const auto& [key, value] : a.items()) {
    if (!b.contains(key) || b[key] != value) {
      std::string theirs = b.contains(key) ? b[key].dump() : "missing";
      return key + " " + value.dump().substr(0, 60) + " vs " + theirs.substr(0, 60);
    }
  }
  return "contents differ";
}

// Adds the run and its devices, or reconciles them with the output's.
Status MergeRunRow(ResultStore& out, const std::string& input, const RunRecord& in, MergeCounts* counts) {
  StatusOr<RunInfo> existing = out.LoadRunInfo(in.info.run_id);
  if (!existing.ok() && existing.status().code() != Status::Code::kNotFound) {
    return existing.status();
  }
  SqliteDb& db = out.db();
  return db.WriteTransaction([&]() -> Status {
    if (!existing.ok()) {
      ++counts->runs_added;
      FG_RETURN_IF_ERROR(UpsertRun(db, in.info));
    } else if (const std::string diff = ProvenanceDifference(*existing, in.info); !diff.empty()) {
      counts->conflicts.push_back(input + ": run " + in.info.run_id + ": " + diff +
                                  " (output vs input); kept the output's");
    } else if (existing->state == "running" && in.info.state != "running") {
      ++counts->runs_updated;
      FG_RETURN_IF_ERROR(UpsertRun(db, in.info));
    } else if (existing->state != in.info.state || existing->finished_at != in.info.finished_at) {
      counts->conflicts.push_back(input + ": run " + in.info.run_id + ": state " + existing->state + " vs " +
                                  in.info.state + " (output vs input); kept the output's");
    }
    StatusOr<std::vector<DeviceInfo>> have = ReadDevices(db, in.info.run_id);
    if (!have.ok()) return have.status();
    std::map<std::string, const DeviceInfo*> by_name;
    for (const DeviceInfo& d : *have) by_name[d.device] = &d;
    std::vector<DeviceInfo> added;
    for (const DeviceInfo& d : in.devices) {
      auto found = by_name.find(d.device);
      if (found == by_name.end()) {
        added.push_back(d);
      } else if (found->second->name != d.name || found->second->driver != d.driver ||
                 found->second->capability != d.capability || found->second->memory_bytes != d.memory_bytes) {
        counts->conflicts.push_back(input + ": run " + in.info.run_id + " device " + d.device + ": '" +
                                    found->second->name + "' vs '" + d.name + "'; kept the output's");
      }
    }
    counts->devices_added += static_cast<int>(added.size());
    return InsertDevices(db, in.info.run_id, added);
  });
}

Status MergeCells(ResultStore& out, const std::string& input, const RunRecord& in, MergeCounts* counts) {
  std::map<std::string, std::string> have;  // cell id -> its JSON
  StatusOr<RunRecord> existing = out.LoadRun(in.info.run_id);
  if (!existing.ok()) return existing.status();
  for (const CellResult& r : existing->cells) have[r.cell.Id()] = CellResultToJson(r).dump();
  std::vector<CellResult> added;
  for (const CellResult& r : in.cells) {
    auto found = have.find(r.cell.Id());
    if (found == have.end()) {
      added.push_back(r);
    } else if (found->second == CellResultToJson(r).dump()) {
      ++counts->cells_identical;
    } else {
      counts->conflicts.push_back(
          input + ": run " + in.info.run_id + " cell " + r.cell.Id() + " (" + r.cell.Label() +
          "): " + FirstDifference(nlohmann::json::parse(found->second), CellResultToJson(r)) +
          " (output vs input); kept the output's");
    }
  }
  counts->cells_added += static_cast<int>(added.size());
  if (added.empty()) return Status::Ok();
  FG_RETURN_IF_ERROR(out.RecordCells(in.info.run_id, added));
  return out.PackRun(in.info.run_id);
}

// The run's device verdicts (a `framegate qualify` run's): the output's missing ones added
// in one transaction, differing ones a conflict.
Status MergeQualifications(ResultStore& out, ResultStore& in, const std::string& input,
                           const std::string& run_id, MergeCounts* counts) {
  StatusOr<std::vector<DeviceQualification>> theirs = in.RunQualifications(run_id);
  if (!theirs.ok()) return theirs.status();
  if (theirs->empty()) return Status::Ok();
  StatusOr<std::vector<DeviceQualification>> ours = out.RunQualifications(run_id);
  if (!ours.ok()) return ours.status();
  std::map<std::string, nlohmann::json> have;
  for (const DeviceQualification& q : *ours) have[q.device] = DeviceQualificationToJson(q);
  std::vector<DeviceQualification> added;
  for (const DeviceQualification& q : *theirs) {
    auto found = have.find(q.device);
    if (found == have.end()) {
      added.push_back(q);
    } else if (const nlohmann::json json = DeviceQualificationToJson(q); found->second != json) {
      counts->conflicts.push_back(input + ": run " + run_id + " qualification of " + q.device + ": " +
                                  FirstDifference(found->second, json) +
                                  " (output vs input); kept the output's");
    }
  }
  counts->qualifications_added += static_cast<int>(added.size());
  if (added.empty()) return Status::Ok();
  return out.RecordQualification(run_id, added);
}

Status MergeGoldens(ResultStore& out, ResultStore& in, const std::string& input, MergeCounts* counts) {
  StatusOr<std::vector<GoldenRecord>> theirs = in.ListGoldens();
  StatusOr<std::vector<GoldenRecord>> ours = out.ListGoldens();
  if (!theirs.ok()) return theirs.status();
  if (!ours.ok()) return ours.status();
  std::map<std::string, const GoldenRecord*> have;
  for (const GoldenRecord& g : *ours) have[g.path + '\n' + g.sha256] = &g;
  for (const GoldenRecord& g : *theirs) {
    auto found = have.find(g.path + '\n' + g.sha256);
    if (found == have.end()) {
      ++counts->goldens_added;
      FG_RETURN_IF_ERROR(out.RecordGolden(g));
    } else if (found->second->config != g.config || found->second->provenance != g.provenance) {
      counts->conflicts.push_back(input + ": golden " + g.path + " (" + g.sha256.substr(0, 12) +
                                  "): config or provenance differs; kept the output's");
    }
  }
  return Status::Ok();
}

// Corrupt when the run holds two results for one cell id: merged, one would replace the
// other (a FAIL hidden by a PASS) without a conflict.
Status CheckOneResultPerCell(const std::string& input, const RunRecord& run) {
  std::map<std::string, const CellResult*> seen;  // cell id -> its first result
  for (const CellResult& r : run.cells) {
    auto [first, inserted] = seen.emplace(r.cell.Id(), &r);
    if (inserted) continue;
    return Status::Corrupt(input + ": run " + run.info.run_id + ": cell " + r.cell.Id() + " (" +
                           r.cell.Label() + ") is stored twice (" + StatusName(first->second->status) +
                           " and " + StatusName(r.status) +
                           "); merging would keep one and hide the other, so nothing was merged");
  }
  return Status::Ok();
}

// Merges an input CheckMergeInput accepted.
Status MergeCheckedInput(ResultStore& out, const std::string& input, MergeCounts* counts) {
  StatusOr<std::unique_ptr<ResultStore>> in = ResultStore::Open(input, ResultStore::OpenMode::kReadOnly);
  if (!in.ok()) return in.status();
  StatusOr<std::vector<RunInfo>> runs = (*in)->ListRuns();
  if (!runs.ok()) return runs.status();
  for (const RunInfo& info : *runs) {
    StatusOr<RunRecord> run = (*in)->LoadRun(info.run_id);
    if (!run.ok()) return run.status();
    FG_RETURN_IF_ERROR(MergeRunRow(out, input, *run, counts));
    FG_RETURN_IF_ERROR(MergeCells(out, input, *run, counts));
    FG_RETURN_IF_ERROR(MergeQualifications(out, **in, input, info.run_id, counts));
  }
  return MergeGoldens(out, **in, input, counts);
}

}  // namespace

Status CheckMergeInput(const std::string& out_path, const std::string& input) {
  if (SameFile(out_path, input)) {
    return Status::InvalidInput(input + ": is the output database itself");
  }
  StatusOr<std::unique_ptr<ResultStore>> in = ResultStore::Open(input, ResultStore::OpenMode::kReadOnly);
  if (!in.ok()) return in.status();
  // A cells row without its run or cell_specs row is not loaded: merging would drop it.
  StatusOr<std::vector<std::string>> dangling = DanglingReferences((*in)->db(), "cells");
  if (!dangling.ok()) return dangling.status();
  if (!dangling->empty()) {
    return Status::Corrupt(input + ": " + dangling->front() +
                           "; merging would lose those results, so nothing was merged");
  }
  StatusOr<std::vector<RunInfo>> runs = (*in)->ListRuns();
  if (!runs.ok()) return runs.status();
  for (const RunInfo& info : *runs) {
    StatusOr<RunRecord> run = (*in)->LoadRun(info.run_id);
    if (!run.ok()) return run.status();
    FG_RETURN_IF_ERROR(CheckOneResultPerCell(input, *run));
  }
  return Status::Ok();
}

Status MergeStore(ResultStore& out, const std::string& input, MergeCounts* counts) {
  FG_RETURN_IF_ERROR(CheckMergeInput(out.path(), input));
  return MergeCheckedInput(out, input, counts);
}

StatusOr<MergeCounts> MergeStores(const std::string& out_path, const std::vector<std::string>& inputs) {
  for (const std::string& input : inputs) FG_RETURN_IF_ERROR(CheckMergeInput(out_path, input));
  StatusOr<std::unique_ptr<ResultStore>> out = ResultStore::Open(out_path);
  if (!out.ok()) return out.status();
  MergeCounts counts;
  for (const std::string& input : inputs) FG_RETURN_IF_ERROR(MergeCheckedInput(**out, input, &counts));
  return counts;
}

}  // namespace framegate
