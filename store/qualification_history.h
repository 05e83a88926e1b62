// `framegate history --qualification --device DEVICE`: the text and JSON forms of every
// verdict of one device over time (ResultStore::DeviceVerdicts).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "store/result_store.h"

namespace framegate {

// {"device": D, "verdicts": [{"run_id", "started_at", "git_sha", "host", "recorded_at",
// then DeviceQualificationToJson's keys: "device", "kind", "verdict", "cells", "repeats",
// "seconds", "reasons"}]}, oldest first as given.
nlohmann::json DeviceVerdictsToJson(const std::string& device, const std::vector<DeviceVerdictPoint>& points);
// A header line ("device cpu:avx512: 3 qualifications"), then per run: started_at, run id,
// git sha (12), host, verdict, reason count, and each reason indented
// (QualificationReason::Describe). "device D: never qualified" when `points` is empty.
std::string FormatDeviceVerdicts(const std::string& device, const std::vector<DeviceVerdictPoint>& points);

}  // namespace framegate
