// Status: the outcome of an operation that can fail, as a value (no exception crosses a
// module boundary). A few codes, each mapped to a process exit code by the CLI:
//   kInvalidInput, kNotFound, kCorrupt -> exit 2 (bad input: the message names the file,
//   the place and the problem); kUnsupported -> the device/build cannot do it;
//   kIoError, kInternal -> exit 2 (harness error).
#pragma once

#include <optional>
#include <string>
#include <utility>

namespace framegate {

class Status {
 public:
  enum class Code { kOk, kInvalidInput, kNotFound, kCorrupt, kUnsupported, kIoError, kInternal };

  Status() = default;
  static Status Ok() { return Status(); }
  static Status InvalidInput(std::string msg) { return Status(Code::kInvalidInput, std::move(msg)); }
  static Status NotFound(std::string msg) { return Status(Code::kNotFound, std::move(msg)); }
  static Status Corrupt(std::string msg) { return Status(Code::kCorrupt, std::move(msg)); }
  static Status Unsupported(std::string msg) { return Status(Code::kUnsupported, std::move(msg)); }
  static Status IoError(std::string msg) { return Status(Code::kIoError, std::move(msg)); }
  static Status Internal(std::string msg) { return Status(Code::kInternal, std::move(msg)); }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  // "invalid input: <message>" etc.; "ok" when ok().
  std::string ToString() const;
  // Prefixes the message with context ("file.toml: " + message), keeping the code.
  Status WithContext(const std::string& context) const;

 private:
  Status(Code code, std::string msg) : code_(code), message_(std::move(msg)) {}
  Code code_ = Code::kOk;
  std::string message_;
};

// A value or the Status that explains why there is none.
template <typename T>
class StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}          // NOLINT: implicit by design
  StatusOr(Status status) : status_(std::move(status)) {}  // NOLINT: must not be ok
  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() { return *value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace framegate

#define FG_RETURN_IF_ERROR(expr)             \
  do {                                       \
    ::framegate::Status fg_status_ = (expr); \
    if (!fg_status_.ok()) return fg_status_; \
  } while (0)
