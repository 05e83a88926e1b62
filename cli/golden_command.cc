// framegate golden make | check | list: the golden store from the command line.
#include <iostream>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/output_file.h"
#include "golden/golden_store.h"
#include "harness/build_info.h"

namespace framegate {
namespace {

struct GoldenOptions {
  PipelineCliOptions pipeline;
  std::string golden_dir;
  std::string json_path;  // golden list --json FILE ("-": stdout)
  int threads = 0;
  CLI::App* make = nullptr;
  CLI::App* check = nullptr;
  CLI::App* list = nullptr;
};

int RunMake(const GoldenOptions& o) {
  ConfigureThreads(o.threads);
  if (o.pipeline.policy != "fp32") {
    return ReportError(Status::InvalidInput("--policy: goldens are made in fp32"));
  }
  StatusOr<PipelineSpec> spec = o.pipeline.ToSpec();
  if (!spec.ok()) return ReportError(spec.status());
  const std::string command = GoldenMakeCommand(*spec, o.golden_dir);
  StatusOr<GoldenStore::Made> made = GoldenStore(o.golden_dir).Make(*spec, command);
  if (!made.ok()) return ReportError(made.status());
  if (made->kept) {
    std::cout << "kept " << made->path << ": it holds this run's frames, latents and steps already\n";
  } else if (made->replaced.empty()) {
    std::cout << "wrote " << made->path << "\n";
  } else {
    std::cout << "replaced " << made->path << ": " << made->replaced
              << " (a calibration made with the old golden is stale)\n";
  }
  return kExitOk;
}

int RunCheckGoldens(const GoldenOptions& o) {
  const GoldenStore store(o.golden_dir);
  std::vector<std::string> problems;
  const Status listed = store.CheckAll(&problems);
  if (!listed.ok()) return ReportError(listed);
  for (const std::string& p : problems) std::cerr << "framegate: error: " << p << "\n";
  const size_t total = store.List()->size();
  std::cout << total << " golden" << (total == 1 ? "" : "s") << " in " << o.golden_dir << ": "
            << (problems.empty() ? "all intact" : std::to_string(problems.size()) + " problem(s)") << "\n";
  return problems.empty() ? kExitOk : kExitHarnessError;
}

int RunList(const GoldenOptions& o) {
  StatusOr<std::vector<GoldenStore::Entry>> entries = GoldenStore(o.golden_dir).List();
  if (!entries.ok()) return ReportError(entries.status());
  nlohmann::json json = nlohmann::json::array();
  for (const GoldenStore::Entry& e : *entries) {
    json.push_back({{"file", e.file},
                    {"sha256", e.sha256},
                    {"config", e.provenance.config},
                    {"device", e.provenance.device},
                    {"created_at", e.provenance.created_at},
                    {"libtorch_version", e.provenance.libtorch_version}});
    if (o.json_path != "-") {
      std::cout << e.file << "  " << e.provenance.config << "  (" << e.provenance.device << ", "
                << e.provenance.created_at << ")\n";
    }
  }
  if (o.json_path.empty()) return kExitOk;
  const Status written = WriteOutputFile(o.json_path, json.dump(2) + "\n");
  return written.ok() ? kExitOk : ReportError(written);
}

}  // namespace

Command AddGoldenCommand(CLI::App& parent) {
  auto o = std::make_shared<GoldenOptions>();
  CLI::App* app = parent.add_subcommand("golden", "Make, check and list FP32 golden frames");
  app->require_subcommand(1);
  o->make = app->add_subcommand("make", "Run a config in FP32 and store its golden");
  AddPipelineOptions(o->make, &o->pipeline);
  AddGoldenDirOption(o->make, &o->golden_dir);
  AddThreadsOption(o->make, &o->threads);
  o->check =
      app->add_subcommand("check", "Verify every golden: sha256, format, config hash (exit 2 on a problem)");
  AddGoldenDirOption(o->check, &o->golden_dir);
  o->list = app->add_subcommand("list", "List the goldens and their provenance");
  AddGoldenDirOption(o->list, &o->golden_dir);
  AddOutputFileOption(o->list, "--json", &o->json_path, "Write the goldens as JSON");
  return {app, [o] {
            if (o->make->parsed()) return RunMake(*o);
            if (o->check->parsed()) return RunCheckGoldens(*o);
            return RunList(*o);
          }};
}

}  // namespace framegate
