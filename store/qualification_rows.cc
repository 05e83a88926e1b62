#include "store/qualification_rows.h"

#include "harness/qualification_json.h"

namespace framegate {
namespace {

// The columns every read takes, in this order, from qualifications or device_verdicts.
constexpr const char* kColumns = "device, kind, verdict, cells, repeats, seconds, reasons";

Status ReadQualification(const SqliteDb& db, const SqliteStatement& row, const std::string& run_id,
                         DeviceQualification* device) {
  device->device = row.Text(0);
  device->kind = row.Text(1);
  const std::string where = db.path() + ": run " + run_id + " device " + device->device;
  if (!ParseDeviceVerdict(row.Text(2), &device->verdict)) {
    return Status::Corrupt(where + ": qualifications.verdict is '" + row.Text(2) + "'");
  }
  device->cells = static_cast<int>(row.Int(3));
  device->repeats = static_cast<int>(row.Int(4));
  device->seconds = row.Real(5);
  const nlohmann::json reasons = nlohmann::json::parse(row.Text(6), nullptr, /*allow_exceptions=*/false);
  if (reasons.is_discarded()) return Status::Corrupt(where + ": qualifications.reasons is not JSON");
  StatusOr<std::vector<QualificationReason>> parsed = QualificationReasonsFromJson(reasons);
  if (!parsed.ok()) return Status::Corrupt(where + ": qualifications.reasons: " + parsed.status().message());
  device->reasons = std::move(*parsed);
  return Status::Ok();
}

}  // namespace

Status WriteQualification(SqliteDb& db, const std::string& run_id, const DeviceQualification& device,
                          const std::string& recorded_at) {
  StatusOr<SqliteStatement> insert = db.Prepare(
      "INSERT OR REPLACE INTO qualifications (run_id, device, kind, verdict, cells, repeats, seconds, "
      "reasons, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)");
  if (!insert.ok()) return insert.status();
  SqliteBinder(*insert) << run_id << device.device << device.kind
                        << std::string(DeviceVerdictName(device.verdict)) << device.cells << device.repeats
                        << device.seconds << QualificationReasonsToJson(device.reasons).dump() << recorded_at;
  return insert->Run();
}

Status ReadRunQualifications(SqliteDb& db, const std::string& run_id,
                             std::vector<DeviceQualification>* devices) {
  StatusOr<SqliteStatement> stmt =
      db.Prepare(std::string("SELECT ") + kColumns + " FROM qualifications WHERE run_id = ? ORDER BY device");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, run_id);
  devices->clear();
  for (;;) {
    StatusOr<bool> row = stmt->Step();
    if (!row.ok()) return row.status();
    if (!*row) return Status::Ok();
    DeviceQualification device;
    FG_RETURN_IF_ERROR(ReadQualification(db, *stmt, run_id, &device));
    devices->push_back(std::move(device));
  }
}

Status ReadDeviceVerdicts(SqliteDb& db, const std::string& device, std::vector<DeviceVerdictPoint>* points) {
  StatusOr<SqliteStatement> stmt =
      db.Prepare(std::string("SELECT ") + kColumns +
                 ", run_id, started_at, git_sha, host, recorded_at FROM device_verdicts WHERE device = ? "
                 "ORDER BY started_at, run_id");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, device);
  points->clear();
  for (;;) {
    StatusOr<bool> row = stmt->Step();
    if (!row.ok()) return row.status();
    if (!*row) return Status::Ok();
    DeviceVerdictPoint point;
    point.run_id = stmt->Text(7);
    point.started_at = stmt->Text(8);
    point.git_sha = stmt->Text(9);
    point.host = stmt->Text(10);
    point.recorded_at = stmt->Text(11);
    FG_RETURN_IF_ERROR(ReadQualification(db, *stmt, point.run_id, &point.qualification));
    points->push_back(std::move(point));
  }
}

}  // namespace framegate
