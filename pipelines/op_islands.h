// Op-level FP32 islands: the ops that run at a module's own level (in its forward body,
// not in a submodule) kept in FP32, for a package whose overflowing op has no submodule
// of its own (an attention written inline in a block's forward, or at the root path,
// where a module island would be the whole denoiser).
//
// An fp32_modules entry "PATH:OP" selects op OP at module PATH's own level: PATH is a
// glob over module paths as for module islands ("denoiser", "denoiser.blocks.*.attn"), OP
// a glob over op names ("aten::softmax", "aten::*matmul"); the first ':' separates them
// (module paths have none). Module islands never match such an entry
// (DtypePolicy::InFp32Module compares whole paths, which hold no ':'), so the reference
// model, which has no op sites, ignores it.
//
// What an op island does (IslandObserver, for model packages): the op's reduced-float
// inputs are cast to float32 and it computes in FP32 (with FP32 accumulation); its output
// stays float32, unrounded, until a consumer outside any island takes it: there it is
// cast back to the compute dtype (rounded through float16 under FP16 emulation), as an
// autocast FP32 op's output is cast by the op that consumes it. So "PATH:aten::matmul"
// and "PATH:aten::softmax" together keep attention logits in FP32 up to the softmax.
// A view or a reshape's copy of an island output is converted as the output is.
#pragma once

#include <string>

#include "pipelines/dtype_policy.h"
#include "pipelines/graph_instrumentation.h"
#include "pipelines/layers.h"
#include "pipelines/storage_map.h"

namespace framegate {

// A float32 value rounded as the FP16 emulation holds it (through float16; with
// DtypePolicy::fp16_headroom_bits, overflowing that many doublings early).
at::Tensor RoundAsEmulatedFp16(const at::Tensor& value, const DtypePolicy& policy);

// Whether `entry` is an op island ("PATH:OP"); false for a module glob.
bool IsOpIslandEntry(const std::string& entry);
// "denoiser.blocks.0.attn" + "aten::softmax" -> "denoiser.blocks.0.attn:aten::softmax".
std::string OpIslandEntry(const std::string& path, const std::string& op);
// The module path of an entry: "a.b:aten::mm" -> "a.b"; a module glob is its own path.
std::string ModuleOfIslandEntry(const std::string& entry);
// The op of an op island entry: "a.b:aten::mm" -> "aten::mm"; "" for a module glob.
std::string OpOfIslandEntry(const std::string& entry);
// Whether an op island entry of `policy` selects op `op` at module `path`'s own level.
bool MatchesOpIsland(const DtypePolicy& policy, const std::string& path, const std::string& op);
// Whether op `op` at `path` computes in FP32 under `policy`: an op island selects it, or
// `path` is inside a module island.
bool InFp32Op(const DtypePolicy& policy, const std::string& path, const std::string& op);
// A GraphObserver that applies a policy's islands around `inner` (the package observer):
//   - island ops skip `inner` entirely (no rounding, no reduced accumulation);
//   - a module island returning to a caller outside the islands hands over a float32
//     copy of its output (`inner` casts its inputs and computes it in FP32);
// and both outputs stay float32 until a consumer outside any island takes them: an op
// (not a module call: the ops inside it are the consumers), or the root's return
// (LeaveRoot). There they are cast to the compute dtype (rounded through float16 under
// FP16 emulation), as an autocast FP32 op's output is cast by the op that consumes it;
// an island consumer takes them in float32. (An in-place op writes into its input 0,
// which is not hooked, graph_instrumentation.h: it writes the float32 value.) An island
// op's input made outside the islands is told to `inner` (EnterIsland). With no island it
// passes everything to `inner` unchanged. One per forward; not thread-safe.
class IslandObserver : public GraphObserver {
 public:
  // `watch` (may be empty) sees each island op's output, unrounded, at sampler `step`, as
  // `inner` shows other op outputs to the model's ModuleObserver (NaN localisation).
  IslandObserver(const DtypePolicy& policy, GraphObserver& inner, const ModuleObserver& watch, int step)
      : policy_(policy), inner_(inner), watch_(watch), step_(step), active_(!policy.fp32_modules.empty()) {}

  at::Tensor Before(const std::string& path, const GraphSite& site, int input_index,
                    const at::Tensor& value) override;
  at::Tensor After(const std::string& path, const GraphSite& site, int output_index,
                   const at::Tensor& value) override;
  // An island output is held in float32 until a consumer outside the islands takes it.
  c10::ScalarType HeldDtype(const at::Tensor& value) const override {
    return active_ && IsIslandOutput(value) ? at::kFloat : inner_.HeldDtype(value);
  }
  // A stand-in for an island output (a shadow's recorded FP32 input) is one too: the
  // consumer outside the islands casts it as it would the output.
  void HoldLike(const at::Tensor& replacement, const at::Tensor& value) override {
    if (active_ && IsIslandOutput(value)) Remember(replacement);
    inner_.HoldLike(replacement, value);
  }
  // The forward's output: cast like an island output taken outside, when it is one.
  at::Tensor LeaveRoot(const at::Tensor& value) const;

 private:
  bool IsIslandOp(const std::string& path, const GraphSite& site) const;
  at::Tensor ToCompute(const at::Tensor& value) const;
  bool IsIslandOutput(const at::Tensor& value) const;
  void Remember(const at::Tensor& island_output);

  const DtypePolicy& policy_;
  GraphObserver& inner_;
  ModuleObserver watch_;  // a copy: callers may pass a temporary
  int step_;
  bool active_;
  StorageMap<bool> island_outputs_;                   // by storage: an output and its views (not kept alive)
  const GraphSite* copy_of_island_output_ = nullptr;  // a copying view whose input is one
};

}  // namespace framegate
