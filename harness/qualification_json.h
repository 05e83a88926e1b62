// The one JSON form of a device's qualification (harness/qualification.h): the store keeps
// the reasons in it (qualifications.reasons), `qualify --json` and the reports write it.
//   reason: {"kind": "persistent_mismatch", "severity": "FAULTY", "cell": "...",
//            "step": 3 | -1 (the decode) | null (no step), "module": "...", "detail": "..."}
//   device: {"device": "cpu:avx512", "kind": "cpu", "verdict": "FAULTY", "cells": 8,
//            "repeats": 3, "seconds": 12.5 | null (not finite), "reasons": [reason...]}
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "harness/qualification.h"
#include "harness/status.h"

namespace framegate {

nlohmann::json QualificationReasonToJson(const QualificationReason& reason);
// InvalidInput naming the first missing or mistyped key, or an unknown severity.
StatusOr<QualificationReason> QualificationReasonFromJson(const nlohmann::json& json);

nlohmann::json QualificationReasonsToJson(const std::vector<QualificationReason>& reasons);
// A JSON array of reasons; InvalidInput naming the index of the first bad one.
StatusOr<std::vector<QualificationReason>> QualificationReasonsFromJson(const nlohmann::json& json);

nlohmann::json DeviceQualificationToJson(const DeviceQualification& device);
// InvalidInput naming the first missing or mistyped key, an unknown verdict or a bad reason.
StatusOr<DeviceQualification> DeviceQualificationFromJson(const nlohmann::json& json);

}  // namespace framegate
