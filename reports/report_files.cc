#include "reports/report_files.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace framegate {

namespace {

// Writes `content` into `file` (truncating it), errors naming `path`: the target itself,
// or its temporary file.
Status WriteTo(const std::string& file, const std::string& path, const std::string& content) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  if (!out) return Status::IoError(path + ": cannot write: " + std::strerror(errno));
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
  out.close();
  if (!out) return Status::IoError(path + ": write failed");
  return Status::Ok();
}

}  // namespace

Status WriteFileAtomically(const std::string& path, const std::string& content) {
  std::error_code error;
  const std::filesystem::file_type type = std::filesystem::status(path, error).type();
  if (type == std::filesystem::file_type::directory) return Status::IoError(path + ": is a folder");
  if (!error && type != std::filesystem::file_type::regular &&
      type != std::filesystem::file_type::not_found) {
    // /dev/null, a FIFO: a rename onto it would replace it with a regular file.
    return WriteTo(path, path, content);
  }
  const std::string temporary = path + ".tmp";
  const Status written = WriteTo(temporary, path, content);
  if (!written.ok()) {
    std::remove(temporary.c_str());
    return written;
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    std::remove(temporary.c_str());
    return Status::IoError(path + ": cannot rename into place: " + reason);
  }
  return Status::Ok();
}

Status CreateDirectories(const std::string& dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) return Status::IoError(dir + ": cannot create folder: " + error.message());
  return Status::Ok();
}

}  // namespace framegate
