// SHA-256 of bytes and of files (OpenSSL's libcrypto), as 64 lowercase hex digits.
#pragma once

#include <string>
#include <string_view>

#include "harness/status.h"

namespace framegate {

std::string Sha256Hex(std::string_view bytes);
// NotFound / IoError naming the path when the file cannot be read.
StatusOr<std::string> Sha256File(const std::string& path);

}  // namespace framegate
