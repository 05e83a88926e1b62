#include "harness/status.h"

namespace framegate {

std::string Status::ToString() const {
  const char* name = "ok";
  switch (code_) {
    case Code::kOk:
      return "ok";
    case Code::kInvalidInput:
      name = "invalid input";
      break;
    case Code::kNotFound:
      name = "not found";
      break;
    case Code::kCorrupt:
      name = "corrupt";
      break;
    case Code::kUnsupported:
      name = "unsupported";
      break;
    case Code::kIoError:
      name = "I/O error";
      break;
    case Code::kInternal:
      name = "internal error";
      break;
  }
  return std::string(name) + ": " + message_;
}

Status Status::WithContext(const std::string& context) const {
  if (ok()) return *this;
  return Status(code_, context + ": " + message_);
}

}  // namespace framegate
