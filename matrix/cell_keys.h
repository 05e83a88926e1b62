// A Cell's identity fields by name, spelled the way matrix files, include/exclude/xfail
// entries and `--filter` spell them: pipeline, device, policy, fault, seed, sampler,
// steps, guidance. One place maps a key to its field, so matching and filtering agree.
#pragma once

#include <string>
#include <vector>

#include "harness/cell.h"

namespace framegate {

// The identity keys in expansion order (the outermost axis first).
const std::vector<std::string>& IdentityKeys();
bool IsIdentityKey(const std::string& key);
// The field `key` of `cell` as a string: pipeline -> Pipeline() ("reference:tiny",
// "model:<folder>"), seed/steps -> decimal, guidance -> as in Cell::CanonicalString(),
// fault/sampler -> the name ("" for none). Precondition: IsIdentityKey(key).
std::string KeyValue(const Cell& cell, const std::string& key);
// Copies the field(s) behind `key` from `from` into `to` (pipeline copies size and
// model_dir). Precondition: IsIdentityKey(key).
void CopyKey(const Cell& from, const std::string& key, Cell* to);
// Whether a device written in an entry matches a cell's device: equal, or "cuda"
// (any GPU), or "cpu:*" (any CPU kernel path), or "all" (any device).
bool DeviceMatches(const std::string& pattern, const std::string& device);

}  // namespace framegate
