// Parsing TOML text with errors that name the place: "<source>:<line>:<column>: <problem>".
// For the modules that read TOML (policies, tolerances, matrices, model.toml), which link
// toml++ themselves; every TOML text goes through ParseTomlText.
#pragma once

#include <cstddef>
#include <string>

#include <toml++/toml.h>

#include "harness/status.h"

namespace framegate {

// "<source>:<line>:<column>" of a node or a parse error's position.
inline std::string TomlPlace(const std::string& source, const toml::source_region& region) {
  return source + ":" + std::to_string(region.begin.line) + ":" + std::to_string(region.begin.column);
}

// toml++ recurses once per level of nesting (a 300,000-segment dotted header overflowed
// the stack): text is bounded before it sees it.
constexpr size_t kMaxTomlBytes = size_t{8} << 20;
constexpr int kMaxTomlDepth = 64;

// Ok, or InvalidInput "<source>:<line>:<column>: ..." for a text over kMaxTomlBytes or
// nested deeper than kMaxTomlDepth levels, counting each table of a [header] or [[header]],
// each dotted key segment, array and inline table. A cheap scan of the text (strings and
// comments skipped), not a parse: malformed text passes for toml++ to report.
Status CheckTomlBounds(const std::string& text, const std::string& source);

// The parsed table, or InvalidInput "<source>:<line>:<column>: <description>" (the
// bounds of CheckTomlBounds included).
inline StatusOr<toml::table> ParseTomlText(const std::string& text, const std::string& source) {
  FG_RETURN_IF_ERROR(CheckTomlBounds(text, source));
  try {
    return toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    return Status::InvalidInput(TomlPlace(source, e.source()) + ": " + std::string(e.description()));
  }
}

}  // namespace framegate
