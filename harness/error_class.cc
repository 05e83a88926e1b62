#include "harness/error_class.h"

#include <regex>

namespace framegate {
namespace {

bool Contains(const std::string& text, const char* needle) { return text.find(needle) != std::string::npos; }

std::string FirstLine(const std::string& text) {
  const auto end = text.find('\n');
  return end == std::string::npos ? text : text.substr(0, end);
}

// The line of a TorchScript traceback that names the failing code:
// '  File "code/__torch__/denoiser.py", line 12, in forward' -> "denoiser.py:12".
std::string TorchScriptLocation(const std::string& what) {
  static const std::regex file_line(R"re(File "(?:[^"]*/)?([^"/]+)", line (\d+))re");
  std::string location;
  for (auto it = std::sregex_iterator(what.begin(), what.end(), file_line); it != std::sregex_iterator();
       ++it) {
    location = (*it)[1].str() + ":" + (*it)[2].str();  // the innermost frame is the last
  }
  return location;
}

// TorchScript puts the real error after the traceback: its last non-empty line.
std::string RealMessage(const std::string& what) {
  if (!Contains(what, "The following operation failed in the TorchScript interpreter"))
    return FirstLine(what);
  std::string last;
  size_t start = 0;
  while (start < what.size()) {
    size_t end = what.find('\n', start);
    if (end == std::string::npos) end = what.size();
    const std::string line = what.substr(start, end - start);
    if (line.find_first_not_of(" \t") != std::string::npos && line.rfind("RuntimeError", 0) == 0)
      last = line.substr(line.find(':') + 2);
    start = end + 1;
  }
  return last.empty() ? FirstLine(what) : last;
}

}  // namespace

const char* ErrorClassName(ErrorClass cls) {
  switch (cls) {
    case ErrorClass::kDtypeMismatch:
      return "dtype_mismatch";
    case ErrorClass::kFp8Promotion:
      return "fp8_promotion";
    case ErrorClass::kUnsupportedOp:
      return "unsupported_op";
    case ErrorClass::kOutOfMemory:
      return "out_of_memory";
    case ErrorClass::kValueOverflow:
      return "value_overflow";
    case ErrorClass::kShapeMismatch:
      return "shape_mismatch";
    case ErrorClass::kOther:
      return "other";
  }
  return "other";
}

std::string ClassifiedError::Reason() const {
  std::string reason = std::string(ErrorClassName(cls)) + ": " + message;
  if (!module.empty()) {
    reason += " (in " + module + (graph_op.empty() ? "" : ", " + graph_op) +
              (note.empty() ? "" : "; " + note) + ")";
  }
  return reason;
}

ClassifiedError ClassifyError(const std::string& what, const std::string& module,
                              const std::string& graph_op) {
  ClassifiedError e;
  e.graph_op = module.empty() ? "" : graph_op;
  e.message = RealMessage(what);
  const std::string script_location = TorchScriptLocation(what);
  e.module = !module.empty() ? module : script_location;
  const std::string& m = e.message;
  static const std::regex not_implemented(R"re("([A-Za-z0-9_:]+)" not implemented for)re");
  std::smatch match;
  if (Contains(m, "Promotion for Float8")) {
    e.cls = ErrorClass::kFp8Promotion;
  } else if (Contains(m, "must have the same dtype") || Contains(m, "to have the same dtype") ||
             Contains(m, "to have same dtype") || Contains(m, "same scalar type") ||
             Contains(m, "dtype to be equal") || Contains(m, "dtypes match") ||
             Contains(m, "but got dtype") || Contains(m, "should be the same") ||
             Contains(m, "expected scalar type") || Contains(m, "Expected object of scalar type") ||
             Contains(m, "Mixed dtype") || Contains(m, "mixed dtype")) {
    e.cls = ErrorClass::kDtypeMismatch;
  } else if (std::regex_search(m, match, not_implemented)) {
    e.cls = ErrorClass::kUnsupportedOp;
    e.op = match[1].str();
  } else if (Contains(m, "Could not run") || Contains(m, "no kernel") || Contains(m, "is not supported on")) {
    e.cls = ErrorClass::kUnsupportedOp;
  } else if (Contains(m, "out of memory") || Contains(m, "can't allocate memory") ||
             Contains(m, "bad_alloc")) {
    e.cls = ErrorClass::kOutOfMemory;
  } else if (Contains(m, "cannot be converted to type") && Contains(m, "without overflow")) {
    e.cls = ErrorClass::kValueOverflow;
  }
  return e;
}

}  // namespace framegate
