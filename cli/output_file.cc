#include "cli/output_file.h"

#include <iostream>

#include "reports/report_files.h"

namespace framegate {

CLI::Option* AddOutputFileOption(CLI::App* app, const std::string& flag, std::string* path,
                                 const std::string& what) {
  return app->add_option(flag, *path, what + " (FILE, or - for stdout)")->type_name("FILE");
}

Status WriteOutputFile(const std::string& path, const std::string& content) {
  if (path != "-") return WriteFileAtomically(path, content);
  std::cout << content << std::flush;
  if (!std::cout) return Status::IoError("standard output: cannot write");
  return Status::Ok();
}

std::ostream& TextStream(std::initializer_list<std::string> outputs) {
  for (const std::string& path : outputs) {
    if (path == "-") return std::cerr;
  }
  return std::cout;
}

}  // namespace framegate
