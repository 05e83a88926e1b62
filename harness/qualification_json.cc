#include "harness/qualification_json.h"

#include <cmath>

namespace framegate {
namespace {

// The string at `key`, or InvalidInput naming the key.
Status ReadString(const nlohmann::json& json, const char* key, std::string* out) {
  auto found = json.find(key);
  if (found == json.end() || !found->is_string()) {
    return Status::InvalidInput(std::string("'") + key + "' is missing or not a string");
  }
  *out = found->get<std::string>();
  return Status::Ok();
}

Status ReadInt(const nlohmann::json& json, const char* key, int* out) {
  auto found = json.find(key);
  if (found == json.end() || !found->is_number_integer()) {
    return Status::InvalidInput(std::string("'") + key + "' is missing or not an integer");
  }
  *out = found->get<int>();
  return Status::Ok();
}

Status ReadVerdict(const nlohmann::json& json, const char* key, DeviceVerdict* out) {
  std::string text;
  FG_RETURN_IF_ERROR(ReadString(json, key, &text));
  if (!ParseDeviceVerdict(text, out)) {
    return Status::InvalidInput(std::string("'") + key + "' is '" + text + "', not PASS, DEGRADED or FAULTY");
  }
  return Status::Ok();
}

}  // namespace

nlohmann::json QualificationReasonToJson(const QualificationReason& reason) {
  nlohmann::json step = nullptr;
  if (reason.step != QualificationReason::kNoStep) step = reason.step;
  return {{"kind", reason.kind},     {"severity", DeviceVerdictName(reason.severity)},
          {"cell", reason.cell},     {"step", step},
          {"module", reason.module}, {"detail", reason.detail}};
}

StatusOr<QualificationReason> QualificationReasonFromJson(const nlohmann::json& json) {
  if (!json.is_object()) return Status::InvalidInput("a reason is not a JSON object");
  QualificationReason reason;
  FG_RETURN_IF_ERROR(ReadString(json, "kind", &reason.kind));
  FG_RETURN_IF_ERROR(ReadVerdict(json, "severity", &reason.severity));
  FG_RETURN_IF_ERROR(ReadString(json, "cell", &reason.cell));
  auto step = json.find("step");
  if (step == json.end() || step->is_null()) {
    reason.step = QualificationReason::kNoStep;
  } else if (step->is_number_integer() && step->get<int64_t>() >= QualificationReason::kDecodeStep &&
             step->get<int64_t>() <= 1000000) {
    reason.step = step->get<int>();
  } else {
    return Status::InvalidInput("'step' is " + step->dump() + ", not a step >= 0, -1 (decode) or null");
  }
  FG_RETURN_IF_ERROR(ReadString(json, "module", &reason.module));
  FG_RETURN_IF_ERROR(ReadString(json, "detail", &reason.detail));
  return reason;
}

nlohmann::json QualificationReasonsToJson(const std::vector<QualificationReason>& reasons) {
  nlohmann::json array = nlohmann::json::array();
  for (const QualificationReason& reason : reasons) array.push_back(QualificationReasonToJson(reason));
  return array;
}

StatusOr<std::vector<QualificationReason>> QualificationReasonsFromJson(const nlohmann::json& json) {
  if (!json.is_array()) return Status::InvalidInput("reasons are not a JSON array");
  std::vector<QualificationReason> reasons;
  for (size_t i = 0; i < json.size(); ++i) {
    StatusOr<QualificationReason> reason = QualificationReasonFromJson(json[i]);
    if (!reason.ok()) return reason.status().WithContext("reason " + std::to_string(i));
    reasons.push_back(std::move(*reason));
  }
  return reasons;
}

nlohmann::json DeviceQualificationToJson(const DeviceQualification& device) {
  return {
      {"device", device.device},
      {"kind", device.kind},
      {"verdict", DeviceVerdictName(device.verdict)},
      {"cells", device.cells},
      {"repeats", device.repeats},
      {"seconds", std::isfinite(device.seconds) ? nlohmann::json(device.seconds) : nlohmann::json(nullptr)},
      {"reasons", QualificationReasonsToJson(device.reasons)}};
}

StatusOr<DeviceQualification> DeviceQualificationFromJson(const nlohmann::json& json) {
  if (!json.is_object()) return Status::InvalidInput("a device is not a JSON object");
  DeviceQualification device;
  FG_RETURN_IF_ERROR(ReadString(json, "device", &device.device));
  FG_RETURN_IF_ERROR(ReadString(json, "kind", &device.kind));
  FG_RETURN_IF_ERROR(ReadVerdict(json, "verdict", &device.verdict));
  FG_RETURN_IF_ERROR(ReadInt(json, "cells", &device.cells));
  FG_RETURN_IF_ERROR(ReadInt(json, "repeats", &device.repeats));
  auto seconds = json.find("seconds");
  if (seconds == json.end() || !(seconds->is_number() || seconds->is_null())) {
    return Status::InvalidInput("'seconds' is missing or not a number");
  }
  device.seconds = seconds->is_null() ? std::nan("") : seconds->get<double>();
  auto reasons = json.find("reasons");
  if (reasons == json.end()) return Status::InvalidInput("'reasons' is missing");
  StatusOr<std::vector<QualificationReason>> parsed = QualificationReasonsFromJson(*reasons);
  if (!parsed.ok()) return parsed.status();
  device.reasons = std::move(*parsed);
  return device;
}

}  // namespace framegate
