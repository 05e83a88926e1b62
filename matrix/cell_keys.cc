#include "matrix/cell_keys.h"

#include <algorithm>
#include <cassert>
#include <sstream>

namespace framegate {

const std::vector<std::string>& IdentityKeys() {
  static const std::vector<std::string> keys = {"pipeline", "device",  "policy", "fault",
                                                "seed",     "sampler", "steps",  "guidance"};
  return keys;
}

bool IsIdentityKey(const std::string& key) {
  const auto& keys = IdentityKeys();
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

std::string KeyValue(const Cell& cell, const std::string& key) {
  assert(IsIdentityKey(key));
  if (key == "pipeline") return cell.Pipeline();
  if (key == "device") return cell.device;
  if (key == "policy") return cell.policy;
  if (key == "fault") return cell.fault;
  if (key == "seed") return std::to_string(cell.seed);
  if (key == "sampler") return cell.sampler;
  if (key == "steps") return std::to_string(cell.steps);
  std::ostringstream guidance;  // the same formatting as Cell::CanonicalString()
  guidance << cell.guidance;
  return guidance.str();
}

void CopyKey(const Cell& from, const std::string& key, Cell* to) {
  assert(IsIdentityKey(key));
  if (key == "pipeline") {
    to->size = from.size;
    to->model_dir = from.model_dir;
  } else if (key == "device") {
    to->device = from.device;
  } else if (key == "policy") {
    to->policy = from.policy;
    to->policy_file = from.policy_file;
  } else if (key == "fault") {
    to->fault = from.fault;
  } else if (key == "seed") {
    to->seed = from.seed;
  } else if (key == "sampler") {
    to->sampler = from.sampler;
  } else if (key == "steps") {
    to->steps = from.steps;
  } else {
    to->guidance = from.guidance;
  }
}

bool DeviceMatches(const std::string& pattern, const std::string& device) {
  if (pattern == device || pattern == "all") return true;
  if (pattern == "cpu:*") return device.rfind("cpu:", 0) == 0;
  return pattern == "cuda" && device.rfind("cuda:", 0) == 0;
}

}  // namespace framegate
