#include "store/qualification_history.h"

#include <sstream>

#include "harness/qualification_json.h"

namespace framegate {

nlohmann::json DeviceVerdictsToJson(const std::string& device,
                                    const std::vector<DeviceVerdictPoint>& points) {
  nlohmann::json verdicts = nlohmann::json::array();
  for (const DeviceVerdictPoint& p : points) {
    nlohmann::json entry = {{"run_id", p.run_id},
                            {"started_at", p.started_at},
                            {"git_sha", p.git_sha},
                            {"host", p.host},
                            {"recorded_at", p.recorded_at}};
    entry.update(DeviceQualificationToJson(p.qualification));
    verdicts.push_back(std::move(entry));
  }
  return {{"device", device}, {"verdicts", verdicts}};
}

std::string FormatDeviceVerdicts(const std::string& device, const std::vector<DeviceVerdictPoint>& points) {
  std::ostringstream out;
  if (points.empty()) {
    out << "device " << device << ": never qualified\n";
    return out.str();
  }
  out << "device " << device << ": " << points.size() << " qualification" << (points.size() == 1 ? "" : "s")
      << "\n";
  for (const DeviceVerdictPoint& p : points) {
    const DeviceQualification& q = p.qualification;
    out << "  " << p.started_at << "  " << p.run_id << "  "
        << (p.git_sha.empty() ? "-" : p.git_sha.substr(0, 12)) << "  " << (p.host.empty() ? "-" : p.host)
        << "  " << DeviceVerdictName(q.verdict);
    if (!q.reasons.empty()) {
      out << "  (" << q.reasons.size() << " reason" << (q.reasons.size() == 1 ? "" : "s") << ")";
    }
    out << "\n";
    for (const QualificationReason& reason : q.reasons) out << "      " << reason.Describe() << "\n";
  }
  return out.str();
}

}  // namespace framegate
