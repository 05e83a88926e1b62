// Parsing TOML text with errors that name the place: "<source>:<line>:<column>: <problem>".
// For the modules that read TOML (policies, tolerances, matrices, model.toml), which link
// toml++ themselves; every TOML text goes through ParseTomlText.
#pragma once

#include <string>

#include <toml++/toml.h>

#include "harness/status.h"
#include "harness/toml_bounds.h"

namespace framegate {

// "<source>:<line>:<column>" of a node or a parse error's position.
inline std::string TomlPlace(const std::string& source, const toml::source_region& region) {
  return source + ":" + std::to_string(region.begin.line) + ":" + std::to_string(region.begin.column);
}

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
