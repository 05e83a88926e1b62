// GraphInstrumentation: sees inside a loaded TorchScript module (a user's model package).
//
// Instrument() rewrites the graphs of every method of a module and of all its submodules,
// once, so that every submodule call (prim::CallMethod) and every floating-point op in a
// method body calls back into framegate through custom ops registered with LibTorch:
//   framegate::before(Tensor x, int site) -> Tensor   on each tensor input of the node
//   framegate::after(Tensor y, int site) -> Tensor    on each tensor output of the node
//   framegate::enter_module(int site) -> ()           just before a submodule call
//   framegate::exit_module(int site) -> ()            just after it (and its `after`s)
// The node then consumes what `before` returned, and its users consume what `after`
// returned, so an observer can also replace values (FP16 emulation rounds an output; an
// FP32 island casts a submodule's inputs to float32, and its outputs back where they are
// consumed).
// All four ops are registered with CONSERVATIVE alias analysis: no pass removes or
// reorders them.
//
// Module paths are dynamic: a class shared by blocks.0 and blocks.1 has ONE graph, so the
// path of an op is the stack of submodule calls that led to it at run time
// ("denoiser" + ".blocks.1" + ".ff"). For one submodule call the order is:
//   Before(caller path) for each tensor input, in input order
//   push the callee's path                          (enter_module; also without tensor inputs)
//   ... the callee's body runs under the callee's path ...
//   After(callee path) for each tensor output, in output order, then for each tensor in a
//     tuple or NamedTuple output (unpacked, then packed again into its own type)
//   pop                                             (exit_module; also without tensor outputs)
// After an exception the stack is left as it was at the throw, so it still names the
// module (and `last_op` the op) where the exception was raised.
//
// Values that alias (views, in-place results: Tensor(a) / Tensor(a!) in the op's schema)
// get no hook, so a replacing observer cannot detach an in-place write through a view
// from its base; ops seen only that way are counted in coverage().unobserved_ops. One
// exception is an in-place op on its input 0 (`h += x`, `x.clamp_(..)`: GraphSite::in_place):
// its output 0, the tensor it wrote, is hooked; an observer must return it unchanged and
// may write into it (a real FP16 run stores the op's result rounded). Another is a dtype
// conversion (aten::to, aten::type_as): its input 0 and output 0 are
// hooked, since it returns its input when the dtype does not change; an observer may
// replace the output with a new tensor (what a real conversion returns) and must return
// input 0 unchanged. A
// submodule call's tensor arguments are always hooked: a callee that writes into its
// argument in place writes into the replacement when the observer replaces it.
//
// Free functions (prim::CallFunction) and methods of script classes are entered: their
// ops are reported under the caller's path, with no push (scripted nn.LayerNorm reaches
// aten::layer_norm through F.layer_norm). torch.nn's fused inference fast paths
// (nn.TransformerEncoderLayer, nn.MultiheadAttention in eval mode without grad) are
// computed by the layer's own ops (pipelines/fused_layers.h), so that their attention
// logits and feed-forward values are seen too; so is scaled_dot_product_attention unless
// the caller keeps it (SdpaKernel::kKept). What is not seen (and said so by coverage()):
// calls whose callee is only known at run time; ops with no tensor input or output; ops
// in torch.jit.fork'ed closures (a subgraph, run on another thread); a module whose
// submodules were inlined (frozen or `torch.jit.freeze`d packages) reports every op under
// its own path.
//
// Preconditions: instrument right after torch::jit::load, before the module's first
// forward: a method's executor copies its graph on its first run (one copy per autocast
// mode, shared by all threads) and silently never sees later rewrites. Run instrumented
// modules with the graph executor's optimizations off (ScopedPlainGraphExecution), so
// that nodes run in graph order, unspecialized and unfused.
//
// Not thread-safe: one Instrumentation is active per thread (ActiveScope), and its call
// stack is shared by every thread that activates it.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include "pipelines/fused_layers.h"
#include "pipelines/weighted_ops.h"

namespace torch::jit {
struct Module;
}

namespace framegate {

// A place in a graph where the observer is called.
struct GraphSite {
  enum class Kind {
    kModuleCall,  // a prim::CallMethod of a submodule: `callee` is its relative path
    kOp,          // a floating-point op in a method body
    // An op that returns a view of its input 0 or, when no view can be made, a copy
    // (aten::reshape, flatten, contiguous, reshape_as): input 0 and output 0 are hooked
    // so that a copy's origin is known. Observers must return both unchanged (a view
    // replaced would leave its base).
    kCopyingView,
  };
  Kind kind = Kind::kOp;
  // kModuleCall: the callee relative to the caller ("blocks.1", "ff.net.0"); "" when a
  // method of the same module is called (self.helper(x)); "?" when the module value does
  // not come from a chain of attribute reads on `self`.
  std::string callee;
  // The callee method ("forward") or the op's qualified name ("aten::linear").
  std::string op;
  // kOp only: the op's entry in pipelines/weighted_ops.h (linear, the convolutions, the
  // matrix products), found once when the graph is planned; nullptr for other ops.
  const WeightedOp* weighted = nullptr;
  // kOp only: for a weighted op whose weight is there (linear's and the convolutions'
  // operand 1; a product's operand read from a module attribute, or a tensor constant in a
  // frozen module): the index of the weight operand among the node's inputs, else -1.
  int weight_input = -1;
  // kOp only: that weight operand is a tensor constant of the graph (a frozen module's
  // weight, a tensor a trace baked in), which module.to(dtype) leaves in the dtype it was
  // saved in.
  bool weight_is_constant = false;
  // kOp only: the op writes its result into its input 0 and returns that tensor (aten::add_,
  // copy_, clamp_): an observer's After must return it unchanged (it may write into it).
  bool in_place = false;
  // kOp only: a tensor list input not built by prim::ListConstruct in the graph (a list
  // comprehension, `pads + [x]`): its elements have no `before`, so an observer cannot
  // see or replace them.
  bool unhooked_list_input = false;
  // kOp only: how the node's argument named "dtype" fixes its output dtype: absent or
  // None (kNone), a constant (kConstant: `dtype_constant`), chosen at run time among
  // values written in the model (kWritten: constants, module attributes such as
  // `self.pe_dtype`, tensors' dtypes, through ifs: `dt = h.dtype if low else
  // torch.float32`; each prim::dtype(v) among them has v hooked as input
  // kDtypeSourceInput, which runs only when its branch does), or from elsewhere (kDynamic:
  // a method's argument).
  enum class DtypeArgument { kNone, kConstant, kWritten, kDynamic };
  DtypeArgument dtype_argument = DtypeArgument::kNone;
  c10::ScalarType dtype_constant = c10::ScalarType::Undefined;
  // kOp only: the constant number aten::masked_fill / masked_fill_ / fill_ writes (-1e9,
  // float('-inf'), a trace's baked torch.finfo(torch.float32).min); absent when the value
  // is computed at run time or the op is another.
  std::optional<double> fill_constant;
};

// Input indices of `before` calls that are not the node's own inputs:
//   kListElementInput: a tensor of a list the op consumes (aten::cat's inputs), hooked
//     where the list is built, in list order;
//   kDtypeSourceInput: the tensor whose dtype the op's `dtype` argument reads
//     (x.to(like.dtype)), hooked where the dtype is read.
// Both come before the op's own inputs; an observer must return them unchanged.
constexpr int kListElementInput = -2;
constexpr int kDtypeSourceInput = -3;

// Where the values go. Default implementations pass values through unchanged.
// An observer may throw: the exception leaves the forward like one raised by an op.
class GraphObserver {
 public:
  virtual ~GraphObserver() = default;
  // A tensor input of a node, before it runs; called for each tensor input in index
  // order (so an op's data input comes before its weight). `path` is the module path the
  // node runs in (for a module call: the CALLER's path). `input_index` is the input's
  // position among the node's inputs (for a module call, input 0 is the module itself, so
  // arguments start at 1). Returns the value the node consumes (must be defined).
  virtual at::Tensor Before(const std::string& path, const GraphSite& site, int input_index,
                            const at::Tensor& value) {
    (void)path, (void)site, (void)input_index;
    return value;
  }
  // A tensor output of a node, after it ran. For a module call `path` is the CALLEE's
  // full path ("denoiser.blocks.1.ff"); for an op, the module it ran in. Returns the
  // value the node's users consume (must be defined).
  virtual at::Tensor After(const std::string& path, const GraphSite& site, int output_index,
                           const at::Tensor& value) {
    (void)path, (void)site, (void)output_index;
    return value;
  }
  // The dtype a real run holds `value` in: its own, except under an emulation that holds
  // float32 values for a narrower dtype (FP16 emulation: the would-be dtype).
  virtual c10::ScalarType HeldDtype(const at::Tensor& value) const { return value.scalar_type(); }
  // `replacement` stands in for `value` (a shadow's recorded FP32 input): an emulation
  // holds it as it holds `value`.
  virtual void HoldLike(const at::Tensor& replacement, const at::Tensor& value) {
    (void)replacement, (void)value;
  }
  // `value`, made outside the FP32 islands, is taken by an op island's op (op_islands.h),
  // which does not pass it on to this observer.
  virtual void EnterIsland(const at::Tensor& value) { (void)value; }
};

// What an instrumentation covers, for reports that must say what they could not see.
struct InstrumentationCoverage {
  int graphs = 0;          // method and function graphs rewritten
  int module_calls = 0;    // prim::CallMethod nodes instrumented
  int ops = 0;             // op nodes instrumented
  int function_calls = 0;  // function or method calls not entered: callee unknown until run
  int unobserved_ops = 0;  // floating-point ops whose tensors are all views, in-place
                           // results, lists or optionals: left without a hook
  // Fused ops (pipelines/fused_layers.h: torch.nn's transformer fast paths, SDPA):
  // computed by their own ops (steered or decomposed), or left fused (a layer called with
  // a mask): one op whose insides no observer sees; SDPA kept for the attention backend
  // a policy names (SdpaKernel::kKept): its logits unseen too.
  int fused_ops_unfused = 0;
  int fused_ops_left = 0;
  int attention_kernels_kept = 0;
  // Ops are reported under the caller's path: a module with submodules but no submodule
  // call in its forward (inlined), or a weight operand that is a tensor constant (frozen).
  bool submodules_inlined = false;
  // One line for reports, e.g. "12 module calls, 87 ops in 5 graphs; 1 function call not
  // entered".
  std::string Summary() const;
};

class GraphInstrumentation {
 private:
  struct State;

 public:
  // Rewrites `module` (all methods of it and of every submodule, each graph once) in
  // place. `root_path` names the module itself ("denoiser"). Never throws; a node kind
  // it does not know is left alone and counted in the coverage. Each call owns its own
  // sites: instrumenting a module twice adds a second, independent set of hooks.
  // The module (its graphs) may outlive the result: hooks of a destroyed instrumentation
  // pass values through. `sdpa`: whether scaled_dot_product_attention is computed by its
  // math path's ops or kept as one op (fused_layers.h).
  static std::unique_ptr<GraphInstrumentation> Instrument(torch::jit::Module& module,
                                                          const std::string& root_path,
                                                          SdpaKernel sdpa = SdpaKernel::kDecomposed);

  const InstrumentationCoverage& coverage() const { return coverage_; }
  // The tensor constants of the module's graphs as loaded (a trace's baked tensors, a
  // frozen module's weights): values that module.to(dtype) does not convert.
  const std::vector<at::Tensor>& tensor_constants() const { return tensor_constants_; }

  // While an ActiveScope lives, the custom ops of graphs instrumented by `this` call
  // `observer`; without one, they pass values through (an instrumented module still runs).
  // Sites of other instrumentations pass values through too. Scopes nest (the
  // destructor restores the previous one); a scope starts with a cleared call stack and
  // leaves the stack as it is when destroyed. Neither argument may die before the scope.
  class ActiveScope {
   public:
    ActiveScope(GraphInstrumentation& instrumentation, GraphObserver& observer);
    ~ActiveScope();
    ActiveScope(const ActiveScope&) = delete;
    ActiveScope& operator=(const ActiveScope&) = delete;

   private:
    State* previous_state_;
    GraphObserver* previous_observer_;
  };

  // The module path on top of the call stack now ("denoiser.blocks.1.ff"; `root_path`
  // when empty), and the last op whose `before` ran ("aten::linear"; "" if none since the
  // last reset); after an exception: where it was raised.
  std::string current_path() const;
  std::string last_op() const;
  // Whether that last op's weight operand is a tensor constant (GraphSite::weight_is_constant).
  bool last_op_weight_is_constant() const;
  // Clears the call stack and last_op (before each forward; an exception leaves the stack
  // unwound). ActiveScope's constructor calls it.
  void ResetStack();

  ~GraphInstrumentation();
  GraphInstrumentation(const GraphInstrumentation&) = delete;
  GraphInstrumentation& operator=(const GraphInstrumentation&) = delete;

 private:
  GraphInstrumentation();
  std::unique_ptr<State> state_;
  InstrumentationCoverage coverage_;
  std::vector<at::Tensor> tensor_constants_;
};

// Turns the graph executor's optimizations off for this scope (and so the profiling
// executor's specialization, inlining and fusion) and restores the previous setting
// after. LibTorch keeps the setting per thread: create the scope on the thread that runs
// the forward.
class ScopedPlainGraphExecution {
 public:
  ScopedPlainGraphExecution();
  ~ScopedPlainGraphExecution();
  ScopedPlainGraphExecution(const ScopedPlainGraphExecution&) = delete;
  ScopedPlainGraphExecution& operator=(const ScopedPlainGraphExecution&) = delete;

 private:
  bool optimize_;
};

}  // namespace framegate
