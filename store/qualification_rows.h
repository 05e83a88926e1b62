// Rows of the qualifications table (schema v9): one `framegate qualify` verdict per run and
// device, its reasons as JSON (harness/qualification_json.h). Internal to the store:
// ResultStore::RecordQualification, RunQualifications and DeviceVerdicts call these.
// Writers expect the caller's write transaction; readers may run inside
// SqliteDb::ReadTransaction.
#pragma once

#include <string>
#include <vector>

#include "harness/qualification.h"
#include "harness/status.h"
#include "store/result_store.h"
#include "store/sqlite_db.h"

namespace framegate {

// Inserts or replaces the row of (run_id, device.device), recorded_at = `recorded_at`.
Status WriteQualification(SqliteDb& db, const std::string& run_id, const DeviceQualification& device,
                          const std::string& recorded_at);
// The run's rows, by device name. Corrupt naming the file, run and device for reasons that
// are not the JSON form.
Status ReadRunQualifications(SqliteDb& db, const std::string& run_id,
                             std::vector<DeviceQualification>* devices);
// The device's rows over every run, oldest run first (started_at, then run_id), through
// the device_verdicts view. Corrupt as above.
Status ReadDeviceVerdicts(SqliteDb& db, const std::string& device, std::vector<DeviceVerdictPoint>* points);

}  // namespace framegate
