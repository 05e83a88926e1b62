// Parsing TOML text with errors that name the place: "<source>:<line>:<column>: <problem>".
// Header-only, for the modules that read TOML (policies, tolerances, matrices), which link
// toml++ themselves.
#pragma once

#include <string>

#include <toml++/toml.h>

#include "harness/status.h"

namespace framegate {

// "<source>:<line>:<column>" of a node or a parse error's position.
inline std::string TomlPlace(const std::string& source, const toml::source_region& region) {
  return source + ":" + std::to_string(region.begin.line) + ":" + std::to_string(region.begin.column);
}

// The parsed table, or InvalidInput "<source>:<line>:<column>: <description>".
inline StatusOr<toml::table> ParseTomlText(const std::string& text, const std::string& source) {
  try {
    return toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    return Status::InvalidInput(TomlPlace(source, e.source()) + ": " + std::string(e.description()));
  }
}

}  // namespace framegate
