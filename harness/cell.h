// Cell: one unit of work, the plain value that crosses from the matrix to the runner.
// pipeline (reference size or model package) x device x dtype policy x seed, plus the
// sampler overrides and the fault case that make the run. The identity fields hash to a
// stable id, so one cell's history lines up across nights and hosts.
//
// VisitCellFields below is the one list of a cell's fields: the id, the JSON, the store's
// rows, the repro command's flags, the matrix keys and the report labels are derived from
// it. A new field is added there (and to the store's schema) and nowhere else.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace framegate {

struct Cell {
  // Identity (hashed into Id()).
  std::string size = "tiny";  // reference pipeline size; ignored when model_dir is set
  std::string model_dir;      // a TorchScript model package folder
  std::string device = "cpu";
  std::string policy = "fp32";
  uint64_t seed = 0;
  std::string fault;    // fault case name, "" for none
  std::string sampler;  // "ddim" / "euler", "" for the pipeline's default
  int steps = 0;        // 0: the pipeline's default
  double guidance = 0;  // 0: the pipeline's default
  // Not identity: how the cell is judged and scheduled.
  std::string tolerance;  // tolerance profile, "" for the policy's own
  std::string xfail;      // reason the cell is expected to fail, "" if not
  // The TOML file ([policy.NAME] tables: a matrix or a policy file) that defines `policy`
  // when it is not a preset; "" for a preset.
  std::string policy_file;
  std::vector<std::string> requirements;  // matrix `requires`, e.g. "cuda", "bf16": capabilities it needs

  // 16 lowercase hex digits: sha256 of CanonicalString(), truncated.
  std::string Id() const;
  // "v1|pipeline=reference:tiny|device=cpu|policy=fp32|seed=0|fault=|sampler=|steps=0|
  // guidance=0" (one line): "pipeline=" then each kIdentity field. A model package is
  // named by its folder's basename, so the same package at another path on another host
  // is the same cell.
  std::string CanonicalString() const;
  // "reference:tiny" or "model:<folder basename>".
  std::string Pipeline() const;
  // "reference:tiny cpu fp16 seed=0" (+ " fault=..." when set), for humans.
  std::string Label() const;
  bool expected_to_fail() const { return !xfail.empty(); }
};

// What a field of a Cell is.
struct CellField {
  enum Role {
    kPipeline,  // size, model_dir: together they make Pipeline(), which the id hashes
    kIdentity,  // hashed into the id as "name=value"
    kJudging,   // how the cell is judged (tolerance, xfail, policy_file): not identity
    kSchedule,  // where it may run (requires): not identity
  };
  const char* name;  // the JSON key, store column and matrix/filter key
  const char* flag;  // the `framegate check` flag that sets it; nullptr when none
  Role role;
  // Empty (or 0) means "none" or "the pipeline's default": such a value is left out of
  // the repro command and of labels.
  bool empty_is_default;
};

// Calls visit(field, value) for each field of `cell` in this fixed order; `value` is a
// reference to the member (const when `cell` is): std::string, uint64_t, int, double or
// std::vector<std::string>. The order is the id's and the JSON's.
template <class C, class Visit>  // C: Cell or const Cell (or a temporary one)
void VisitCellFields(C&& cell, Visit&& visit) {
  visit(CellField{"size", "--size", CellField::kPipeline, false}, cell.size);
  visit(CellField{"model_dir", "--model", CellField::kPipeline, true}, cell.model_dir);
  visit(CellField{"device", "--device", CellField::kIdentity, false}, cell.device);
  visit(CellField{"policy", "--policy", CellField::kIdentity, false}, cell.policy);
  visit(CellField{"seed", "--seed", CellField::kIdentity, false}, cell.seed);
  visit(CellField{"fault", "--fault", CellField::kIdentity, true}, cell.fault);
  visit(CellField{"sampler", "--sampler", CellField::kIdentity, true}, cell.sampler);
  visit(CellField{"steps", "--steps", CellField::kIdentity, true}, cell.steps);
  visit(CellField{"guidance", "--guidance", CellField::kIdentity, true}, cell.guidance);
  visit(CellField{"tolerance", "--tolerance", CellField::kJudging, true}, cell.tolerance);
  visit(CellField{"xfail", nullptr, CellField::kJudging, true}, cell.xfail);
  visit(CellField{"policy_file", "--policy-file", CellField::kJudging, true}, cell.policy_file);
  visit(CellField{"requires", nullptr, CellField::kSchedule, true}, cell.requirements);
}

// A field's value as text, the same everywhere (id, keys, labels, flags): strings as they
// are, integers in decimal, doubles as an ostream writes them ("5", "7.5"), lists joined
// by '+'.
std::string FieldText(const std::string& value);
std::string FieldText(uint64_t value);
std::string FieldText(int value);
std::string FieldText(double value);
std::string FieldText(const std::vector<std::string>& value);

// Whether `value` is the field's "none / pipeline default" (see CellField::empty_is_default).
bool IsUnset(const CellField& field, const std::string& value);
bool IsUnset(const CellField& field, uint64_t value);
bool IsUnset(const CellField& field, int value);
bool IsUnset(const CellField& field, double value);
bool IsUnset(const CellField& field, const std::vector<std::string>& value);

// The set identity fields other than device, policy and seed, as {name, text} in list
// order (fault, sampler, steps, guidance): what tells apart the cells of one
// pipeline x device x policy row in labels and benchmark names.
std::vector<std::pair<std::string, std::string>> VariantFields(const Cell& cell);

// The arguments of the one command that reruns `cell` alone and judges it: "check" and
// each set field's flag and value (the pipeline as --size or --model), unquoted words
// (quote them with ShellCommand).
std::vector<std::string> CheckArgsFor(const Cell& cell);

}  // namespace framegate
