#include "golden/golden_store.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "harness/build_info.h"
#include "harness/cell.h"
#include "harness/sha256.h"
#include "harness/shell_quote.h"
#include "pipelines/model_package.h"

namespace framegate {
namespace {

// An exclusive lock on DIR/MANIFEST.json.lock for one read-modify-write of the manifest:
// processes making goldens into one folder at once (a sweep's jobs, per-seed CI jobs)
// would otherwise each write the manifest they read, losing the others' entries.
class ManifestLock {
 public:
  explicit ManifestLock(const std::string& path)
      : fd_(open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644)) {
    if (fd_ >= 0 && flock(fd_, LOCK_EX) != 0) {
      close(fd_);
      fd_ = -1;
    }
  }
  ~ManifestLock() {
    if (fd_ >= 0) close(fd_);  // releases the lock
  }
  ManifestLock(const ManifestLock&) = delete;
  ManifestLock& operator=(const ManifestLock&) = delete;
  bool held() const { return fd_ >= 0; }

 private:
  int fd_;
};

using nlohmann::json;

std::string PathSafe(const std::string& text) {
  std::string out;
  for (char c : text) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '-';
  return out;
}

std::string UtcNow() {
  const std::time_t now = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return buf;
}

json EntryToJson(const GoldenStore::Entry& e) {
  json j = ProvenanceToJson(e.provenance);
  j["sha256"] = e.sha256;
  return j;
}

}  // namespace

std::string GoldenKey::CanonicalString() const {
  std::ostringstream out;
  out << "golden-v1|pipeline=" << pipeline << "|weights=" << weights;
  if (!fault.empty()) out << "|fault=" << fault;
  out << "|sampler=" << SamplerKindName(sampler.kind) << "|steps=" << sampler.steps
      << "|guidance=" << sampler.guidance << "|seed=" << seed;
  return out.str();
}

std::string GoldenKey::Hash() const { return Sha256Hex(CanonicalString()); }

std::string GoldenKey::FileName() const {
  return PathSafe(pipeline) + (fault.empty() ? "" : "-" + PathSafe(fault)) + "-seed" + std::to_string(seed) +
         "-" + Hash().substr(0, 8) + ".safetensors";
}

StatusOr<GoldenKey> GoldenKeyOf(const PipelineSpec& spec) {
  GoldenKey key;
  key.seed = spec.seed;
  if (spec.model_dir.empty()) {
    StatusOr<ReferenceSize> size = FindReferenceSize(spec.size);
    if (!size.ok()) return size.status();
    key.pipeline = "reference:" + size->name;
    key.weights = "seed=" + std::to_string(spec.weight_seed);
    key.fault = FaultCaseName(spec.fault);
    key.sampler = size->sampler;
  } else {
    StatusOr<ModelManifest> manifest = ReadModelManifest(spec.model_dir);
    if (!manifest.ok()) return manifest.status();
    std::string dir = spec.model_dir;
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    key.pipeline = "model:" + std::filesystem::path(dir).filename().string();
    std::string weights;
    for (const char* module : {"denoiser", "decoder"}) {
      StatusOr<std::string> sha = Sha256File(spec.model_dir + "/" + module + ".pt");
      if (!sha.ok()) return sha.status();
      weights += (weights.empty() ? "" : ",") + std::string(module) + "=" + sha->substr(0, 16);
    }
    key.weights = weights;
    key.sampler = manifest->sampler;
  }
  if (spec.sampler) key.sampler = *spec.sampler;
  return key;
}

std::vector<std::string> ConfigArguments(const PipelineSpec& spec) {
  std::vector<std::string> words;
  if (spec.model_dir.empty()) {
    words.insert(words.end(), {"--size", spec.size});
  } else {
    words.insert(words.end(), {"--model", spec.model_dir});
  }
  if (spec.weight_seed != 0) words.insert(words.end(), {"--weight-seed", FieldText(spec.weight_seed)});
  if (spec.fault != FaultCase::kNone) words.insert(words.end(), {"--fault", FaultCaseName(spec.fault)});
  if (spec.sampler) {
    words.insert(words.end(),
                 {"--sampler", SamplerKindName(spec.sampler->kind), "--steps", FieldText(spec.sampler->steps),
                  "--guidance", FieldText(spec.sampler->guidance)});
  }
  return words;
}

std::string GoldenMakeCommand(const PipelineSpec& spec, const std::string& dir) {
  std::vector<std::string> words = {"framegate", "golden", "make"};
  const std::vector<std::string> config = ConfigArguments(spec);
  words.insert(words.end(), config.begin(), config.begin() + 2);  // --size/--model
  words.insert(words.end(), {"--seed", FieldText(spec.seed)});
  words.insert(words.end(), config.begin() + 2, config.end());
  words.insert(words.end(), {"--golden-dir", dir});
  return ShellCommand(words);
}

std::string GoldenDifference(const Golden& stored, const Golden& made) {
  if (!stored.trajectory.defined() && made.trajectory.defined()) return "it has no steps (format version 1)";
  const std::pair<const char*, std::pair<at::Tensor, at::Tensor>> values[] = {
      {"frames", {stored.frames, made.frames}},
      {"latents", {stored.latents, made.latents}},
      {"steps", {stored.trajectory, made.trajectory}},
  };
  for (const auto& [name, pair] : values) {
    const auto& [a, b] = pair;
    if (!a.defined() || !b.defined()) {
      if (a.defined() != b.defined()) return std::string("its ") + name + " are missing";
      continue;
    }
    if (a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type())
      return std::string("its ") + name + " have another shape";
    if (at::equal(a, b)) continue;  // values: -0 equals +0
    char by[32];
    std::snprintf(by, sizeof by, "%.3g", (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>());
    return std::string("its ") + name + " differ from this run's by up to " + by;
  }
  return "";
}

StatusOr<GoldenStore::Made> GoldenStore::Make(const PipelineSpec& spec, const std::string& command) const {
  if (spec.policy.name != "fp32") {
    return Status::InvalidInput("a golden is made under the fp32 policy, not '" + spec.policy.name + "'");
  }
  StatusOr<GoldenKey> key = GoldenKeyOf(spec);
  if (!key.ok()) return key.status();
  PipelineSpec traced = spec;
  traced.keep_trajectory = true;  // a golden keeps every step's latents, for step replay
  StatusOr<PipelineOutcome> outcome = RunPipeline(traced);
  if (!outcome.ok()) return outcome.status();
  if (outcome->kind != RunEnd::kFinished) {
    return Status::Internal("the FP32 reference run failed: " + (outcome->kind == RunEnd::kError
                                                                     ? outcome->error.Reason()
                                                                     : outcome->unsupported));
  }
  const GenerationResult& result = outcome->result;
  if (!at::isfinite(result.decoded).all().item<bool>() || !at::isfinite(result.latents).all().item<bool>()) {
    return Status::Internal("the FP32 reference run is not finite: no golden written");
  }
  const std::string path = PathFor(*key);
  Golden golden;
  golden.frames = result.frames;
  golden.latents = result.latents;
  golden.trajectory = result.trajectory;
  std::string replaced;
  std::error_code ec;
  if (std::filesystem::exists(path, ec)) {
    StatusOr<Golden> stored = Load(*key);
    if (stored.ok()) {
      replaced = GoldenDifference(*stored, golden);
    } else {  // the message without the path the caller prints
      const std::string& why = stored.status().message();
      replaced =
          "it could not be read: " + (why.rfind(path + ": ", 0) == 0 ? why.substr(path.size() + 2) : why);
    }
    if (replaced.empty()) return Made{path, /*kept=*/true, ""};
  }
  std::filesystem::create_directories(dir_, ec);
  if (ec) return Status::IoError(dir_ + ": cannot create the folder: " + ec.message());

  const BuildInfo build = CollectBuildInfo();
  GoldenProvenance& p = golden.provenance;
  p.config = key->CanonicalString();
  p.config_hash = key->Hash();
  p.framegate_version = build.framegate_version + " (" + build.git_sha + ")";
  p.libtorch_version = build.libtorch_version;
  p.blas = build.blas;
  p.device = spec.device + ": " + (spec.device == "cpu" ? DetectCpu().model : spec.device);
  p.command = command;
  p.created_at = UtcNow();
  FG_RETURN_IF_ERROR(WriteGolden(path, golden));
  StatusOr<std::string> sha = Sha256File(path);
  if (!sha.ok()) return sha.status();
  FG_RETURN_IF_ERROR(AddToManifest({key->FileName(), *sha, p}));
  return Made{path, /*kept=*/false, replaced};
}

StatusOr<std::vector<GoldenStore::Entry>> GoldenStore::List() const {
  std::vector<Entry> entries;
  std::ifstream in(ManifestPath());
  if (!in) return entries;
  const json manifest = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!manifest.is_object() || !manifest.contains("goldens") || !manifest["goldens"].is_object()) {
    return Status::Corrupt(ManifestPath() + ": not a golden manifest (no \"goldens\" object)");
  }
  for (const auto& [file, e] : manifest["goldens"].items()) {
    if (!e.is_object() || !e.contains("sha256") || !e["sha256"].is_string()) {
      return Status::Corrupt(ManifestPath() + ": entry '" + file + "' has no sha256");
    }
    Entry entry;
    entry.file = file;
    entry.sha256 = e["sha256"].get<std::string>();
    entry.provenance = ProvenanceFromJson(e);
    entries.push_back(std::move(entry));
  }
  return entries;  // json objects iterate in key order: sorted by file name
}

Status GoldenStore::AddToManifest(const Entry& entry) const {
  const ManifestLock lock(ManifestPath() + ".lock");
  if (!lock.held()) return Status::IoError(ManifestPath() + ".lock: cannot lock the manifest");
  StatusOr<std::vector<Entry>> entries = List();
  if (!entries.ok()) return entries.status();
  json goldens = json::object();
  for (const Entry& e : *entries) goldens[e.file] = EntryToJson(e);
  goldens[entry.file] = EntryToJson(entry);
  const json manifest = {{"format_version", kGoldenFormatVersion}, {"goldens", goldens}};
  const std::string tmp = ManifestPath() + ".tmp." + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << manifest.dump(2) << "\n";
    if (!out.flush()) return Status::IoError(tmp + ": write failed");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, ManifestPath(), ec);
  if (ec) return Status::IoError(ManifestPath() + ": " + ec.message());
  return Status::Ok();
}

StatusOr<Golden> GoldenStore::Load(const GoldenKey& key) const {
  const std::string path = PathFor(key);
  if (!std::filesystem::exists(path)) return Status::NotFound("no golden " + path);
  StatusOr<std::vector<Entry>> entries = List();
  if (!entries.ok()) return entries.status();
  const auto it = std::find_if(entries->begin(), entries->end(),
                               [&](const Entry& e) { return e.file == key.FileName(); });
  if (it == entries->end()) {
    return Status::Corrupt(path + ": not in " + ManifestPath() + " (no recorded sha256)");
  }
  StatusOr<std::string> sha = Sha256File(path);
  if (!sha.ok()) return sha.status();
  if (*sha != it->sha256) {
    return Status::Corrupt(path + ": sha256 " + sha->substr(0, 12) + "... differs from the manifest's " +
                           it->sha256.substr(0, 12) + "... (file changed or damaged)");
  }
  StatusOr<Golden> golden = ReadGolden(path);
  if (!golden.ok()) return golden.status();
  if (golden->provenance.config != key.CanonicalString()) {
    return Status::Corrupt(path + ": made for config '" + golden->provenance.config + "', expected '" +
                           key.CanonicalString() + "'");
  }
  return golden;
}

Status GoldenStore::CheckAll(std::vector<std::string>* problems) const {
  StatusOr<std::vector<Entry>> entries = List();
  if (!entries.ok()) return entries.status();
  for (const Entry& e : *entries) {
    const std::string path = dir_ + "/" + e.file;
    StatusOr<std::string> sha = Sha256File(path);
    if (!sha.ok()) {
      problems->push_back(path + ": missing (listed in the manifest)");
      continue;
    }
    if (*sha != e.sha256) {
      problems->push_back(path + ": sha256 differs from the manifest's (file changed or damaged)");
      continue;
    }
    StatusOr<Golden> golden = ReadGolden(path);
    if (!golden.ok()) {
      problems->push_back(golden.status().message());
      continue;
    }
    const GoldenProvenance& p = golden->provenance;
    if (Sha256Hex(p.config) != p.config_hash ||
        e.file.find(p.config_hash.substr(0, 8)) == std::string::npos) {
      problems->push_back(path + ": config hash does not match its config or its file name");
    }
  }
  std::error_code ec;
  for (const auto& file : std::filesystem::directory_iterator(dir_, ec)) {
    const std::string name = file.path().filename().string();
    if (file.path().extension() != ".safetensors") continue;
    if (std::none_of(entries->begin(), entries->end(), [&](const Entry& e) { return e.file == name; })) {
      problems->push_back(file.path().string() + ": not in the manifest");
    }
  }
  return Status::Ok();
}

}  // namespace framegate
