// framegate audit: the dtype audit of a pipeline under a policy (field reports F1, F4).
#include <iostream>

#include "cli/commands.h"
#include "harness/build_info.h"
#include "pipelines/dtype_audit.h"

namespace framegate {
namespace {

struct AuditOptions {
  PipelineCliOptions pipeline;
  int threads = 0;
};

int RunAudit(const AuditOptions& o) {
  ConfigureThreads(o.threads);
  StatusOr<PipelineSpec> spec = o.pipeline.ToSpec();
  if (!spec.ok()) return ReportError(spec.status());
  StatusOr<DtypeAudit> audit = AuditDtypes(*spec);
  if (!audit.ok()) return ReportError(audit.status());
  std::cout << "dtype audit of " << spec->PipelineName() << " under " << spec->policy.name
            << (spec->fault != FaultCase::kNone ? std::string(" (fault ") + FaultCaseName(spec->fault) + ")"
                                                : "")
            << "\n";
  std::cout << "weights not in the policy's dtype: " << audit->weights.size() << "\n";
  for (const WeightDtypeFinding& f : audit->weights)
    std::cout << "  " << f.name << ": " << f.actual << ", policy wants " << f.expected << "\n";
  if (audit->traced) {
    std::cout << "modules whose input dtype differs from their weights (one traced step and decode): "
              << audit->inputs.size() << "\n";
    for (const DtypeMismatch& m : audit->inputs)
      std::cout << "  " << m.module << ": input " << DtypeName(m.input) << ", weight " << DtypeName(m.weight)
                << "\n";
    if (audit->step_error) std::cout << "traced run failed: " << audit->step_error->Reason() << "\n";
    if (!audit->observed.empty()) std::cout << "watched: " << audit->observed << "\n";
  } else {
    std::cout << "NOT traced: only the stored weights were checked\n";
  }
  std::cout << (audit->Clean() ? "clean\n" : "FOUND dtype problems\n");
  return audit->Clean() ? kExitOk : kExitFailed;
}

}  // namespace

Command AddAuditCommand(CLI::App& parent) {
  auto o = std::make_shared<AuditOptions>();
  CLI::App* app = parent.add_subcommand(
      "audit", "List weights and module inputs whose dtype does not match the policy (exit 1 if any)");
  AddPipelineOptions(app, &o->pipeline);
  AddThreadsOption(app, &o->threads);
  return {app, [o] { return RunAudit(*o); }};
}

}  // namespace framegate
