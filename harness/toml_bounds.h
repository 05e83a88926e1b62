// The bounds a TOML text must keep before toml++ parses it (toml_source.h's ParseTomlText
// checks them). toml++ recurses once per level of nesting: a 300,000-segment dotted header
// overflowed the stack. No toml++ here: the scan only reads characters.
#pragma once

#include <cstddef>
#include <string>

#include "harness/status.h"

namespace framegate {

constexpr size_t kMaxTomlBytes = size_t{8} << 20;
constexpr int kMaxTomlDepth = 64;

// Ok, or InvalidInput "<source>:<line>:<column>: ..." for a text over kMaxTomlBytes or
// nested deeper than kMaxTomlDepth levels, counting each table of a [header] or [[header]],
// each dotted key segment, array and inline table. A cheap scan of the text (strings and
// comments skipped), not a parse: malformed text passes for toml++ to report.
Status CheckTomlBounds(const std::string& text, const std::string& source);

}  // namespace framegate
