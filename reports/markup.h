// Escaping text for HTML and XML. Every string that comes from a config, a model, a file
// name or an exception goes through one of these before it lands in a report.
#pragma once

#include <string>

namespace framegate {

// Replaces each byte sequence that is not valid UTF-8 with '?'.
std::string ValidUtf8(const std::string& text);
// & < > " ' as entities (safe in element text and in quoted attributes), after ValidUtf8.
std::string HtmlEscape(const std::string& text);
// HtmlEscape, plus control characters that XML 1.0 forbids (all below 0x20 but tab,
// newline and carriage return) replaced with '?'.
std::string XmlEscape(const std::string& text);
// A number for a report: "%.6g", or "inf", "-inf", "nan".
std::string NumberText(double value);

}  // namespace framegate
