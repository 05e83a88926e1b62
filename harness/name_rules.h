// The one rule for names that end up in folder names, file names, command lines and
// reports: policy names, pipeline names (model.toml `name`, a model folder's name in a
// matrix) and run tags. A name is 1 to 64 characters of [A-Za-z0-9._+-] and is neither
// "." nor "..": it cannot leave a folder, run code when pasted, or overflow a path.
#pragma once

#include <string>

#include "harness/status.h"

namespace framegate {

inline constexpr size_t kMaxNameLength = 64;

// Ok when `name` follows the rule; else InvalidInput, one line:
//   "<what> 'x y' must be 1 to 64 characters of A-Z a-z 0-9 . _ + - (not . or ..)"
// `what` says which name ("policy name", "tag"). The name is shown with control
// characters escaped and cut after 64 characters, so the message stays one short line.
// Callers prefix the place (file:line:col or the flag).
Status CheckName(const std::string& what, const std::string& name);

// A comma-separated list of names (`--tags a,b`): CheckName on each (an empty element,
// as in "a,,b", is an empty name).
Status CheckNameList(const std::string& what, const std::string& names);

}  // namespace framegate
