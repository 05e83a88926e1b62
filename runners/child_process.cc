#include "runners/child_process.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "harness/cell_result_json.h"

namespace framegate {

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

int RunProcess(const std::vector<std::string>& argv, const std::string& dir) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    const int out = open((dir + "/stdout").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = open((dir + "/stderr").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out >= 0) dup2(out, 1);
    if (err >= 0) dup2(err, 2);
    execv(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

std::string LastLine(const std::string& path) {
  std::string text = ReadText(path);
  while (!text.empty() && text.back() == '\n') text.pop_back();
  const size_t newline = text.rfind('\n');
  return newline == std::string::npos ? text : text.substr(newline + 1);
}

StatusOr<CellResult> RunCheckProcess(const std::string& executable, const Cell& cell,
                                     const std::vector<std::string>& extra_args, const std::string& scratch) {
  std::vector<std::string> argv = CheckArgsFor(cell);
  argv.insert(argv.begin(), executable);
  const std::string json_path = scratch + "/check.json";
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  argv.insert(argv.end(), {"--json", json_path});
  std::remove(json_path.c_str());
  const int code = RunProcess(argv, scratch);
  if (code == 2) {
    // The child's one-line error, without its "framegate: error: " (the caller prints one).
    std::string line = LastLine(scratch + "/stderr");
    const std::string prefix = "framegate: error: ";
    if (line.rfind(prefix, 0) == 0) line.erase(0, prefix.size());
    return Status::InvalidInput(line);
  }
  if (code != 0 && code != 1) {
    return Status::Internal("the check of " + cell.Label() + " in its own process failed (exit " +
                            std::to_string(code) + "): " + LastLine(scratch + "/stderr"));
  }
  try {
    const nlohmann::json cells = nlohmann::json::parse(ReadText(json_path)).at("cells");
    return CellResultFromJson(cells.at(0));
  } catch (const std::exception& e) {
    return Status::Internal(json_path + ": cannot read the result of " + cell.Label() + ": " + e.what());
  }
}

}  // namespace framegate
