// GraphInstrumentation: plans the hooks of every graph of a module, inserts them as calls
// of framegate's custom ops, and runs those ops against the active observer. Contract:
// graph_instrumentation.h.
#include "pipelines/graph_instrumentation.h"

#include <atomic>
#include <cassert>
#include <cstdint>
#include <unordered_set>
#include <utility>

#include <ATen/core/op_registration/op_registration.h>
#include <c10/util/Exception.h>
#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/runtime/graph_executor.h>

namespace framegate {
namespace {

namespace jit = torch::jit;
using Kind = GraphSite::Kind;

constexpr char kBeforeSchema[] = "framegate::before(Tensor x, int site) -> Tensor";
// The same for an optional tensor (a bias, a norm's weight: None or a tensor).
constexpr char kBeforeOptionalSchema[] = "framegate::before_optional(Tensor? x, int site) -> Tensor?";
constexpr char kAfterSchema[] = "framegate::after(Tensor y, int site) -> Tensor";
constexpr char kEnterSchema[] = "framegate::enter_module(int site) -> ()";
constexpr char kExitSchema[] = "framegate::exit_module(int site) -> ()";
// The dtype a model compares (`if h.dtype == torch.float16:`): the one the active observer
// says a real run holds `x` in (GraphObserver::HeldDtype), `dtype` (x's own) without one.
constexpr char kHeldDtypeSchema[] = "framegate::held_dtype(Tensor x, int dtype) -> int";

// Slot ids are process-wide: each Instrument() takes the next contiguous range.
std::atomic<int64_t> next_slot_id{0};

// One inserted custom-op call: the site it reports and the node input or output it hooks.
struct HookSlot {
  int site;      // index into SiteTable::sites
  int io_index;  // input_index (before) or output_index (after); -1 for enter/exit
};

// The sites and slots of one instrumentation; it owns slot ids
// [first_slot, first_slot + slots.size()).
struct SiteTable {
  int64_t first_slot = 0;
  std::vector<GraphSite> sites;
  std::vector<HookSlot> slots;

  int AddSite(GraphSite site) {
    sites.push_back(std::move(site));
    return static_cast<int>(sites.size()) - 1;
  }
  // Returns the process-wide id of the new slot.
  int64_t AddSlot(int site, int io_index) {
    slots.push_back(HookSlot{site, io_index});
    return first_slot + static_cast<int64_t>(slots.size()) - 1;
  }
  // The slot with process-wide id `id`, or nullptr when another instrumentation owns it.
  const HookSlot* Find(int64_t id) const {
    const int64_t index = id - first_slot;
    if (index < 0 || index >= static_cast<int64_t>(slots.size())) return nullptr;
    return &slots[static_cast<size_t>(index)];
  }
};

// A node to instrument, planned before any graph is changed.
struct NodePlan {
  jit::Node* node = nullptr;
  GraphSite site;
  std::vector<size_t> inputs;   // inputs that get a `before`, ascending
  std::vector<size_t> outputs;  // outputs that get an `after`, ascending
  // Inputs of other nodes that feed this one (a list's elements, the tensor a dtype is
  // read from): each gets a `before` of this node's site, reported as `io_index`.
  struct FeederInput {
    jit::Node* feeder;
    size_t input;
    int io_index;  // kListElementInput or kDtypeSourceInput
  };
  std::vector<FeederInput> feeder_inputs;
  // A module call's outputs that are plain tuples holding tensors (nn.MultiheadAttention's
  // (output, weights)): each tensor element gets an `after`, reported as output index
  // outputs().size() + its place among the elements hooked so far.
  struct TupleOutput {
    size_t output;
    std::vector<size_t> tensor_elements;
  };
  std::vector<TupleOutput> tuple_outputs;

  // Custom-op calls the plan inserts: one slot each.
  size_t SlotCount() const {
    size_t elements = 0;
    for (const TupleOutput& tuple : tuple_outputs) elements += tuple.tensor_elements.size();
    return feeder_inputs.size() + inputs.size() + outputs.size() + elements +
           (site.kind == Kind::kModuleCall ? 2 : 0);
  }
};

c10::Symbol OpSymbol(const char* schema) {
  const std::string text(schema);
  return c10::Symbol::fromQualString(text.substr(0, text.find('(')));
}

bool IsTensor(const jit::Value* value) { return value->type()->kind() == c10::TypeKind::TensorType; }

bool IsOptionalTensor(const jit::Value* value) {
  const auto optional = value->type()->cast<c10::OptionalType>();
  return optional && optional->getElementType()->kind() == c10::TypeKind::TensorType;
}

bool IsFloatingOrUnknownTensor(const jit::Value* value) {
  const auto tensor = value->type()->cast<c10::TensorType>();
  if (!tensor) return false;
  const c10::optional<at::ScalarType> dtype = tensor->scalarType();
  return !dtype || c10::isFloatingType(*dtype);
}

bool HasFloatingTensor(const jit::Node* node) {
  for (const jit::Value* input : node->inputs()) {
    if (IsFloatingOrUnknownTensor(input)) return true;
  }
  for (const jit::Value* output : node->outputs()) {
    if (IsFloatingOrUnknownTensor(output)) return true;
  }
  return false;
}

bool IsModuleValue(const jit::Value* value) {
  if (const auto type = value->type()->cast<c10::ClassType>()) return type->is_module();
  if (const auto type = value->type()->cast<c10::InterfaceType>()) return type->is_module();
  return false;
}

// Appends the nodes of `block` and of the blocks nested in them, in graph order.
void CollectNodes(jit::Block* block, std::vector<jit::Node*>& nodes) {
  for (jit::Node* node : block->nodes()) {
    nodes.push_back(node);
    for (jit::Block* nested : node->blocks()) CollectNodes(nested, nodes);
  }
}

bool HasModuleCall(jit::Block* block) {
  std::vector<jit::Node*> nodes;
  CollectNodes(block, nodes);
  for (const jit::Node* node : nodes) {
    if (node->kind() == c10::prim::CallMethod && IsModuleValue(node->input(0))) return true;
  }
  return false;
}

// The path of `module` relative to `self` ("blocks.1" for self.blocks then getattr "1"):
// "" when it is `self`, "?" when it is not read by a chain of prim::GetAttr from `self`.
std::string RelativeModulePath(const jit::Value* module, const jit::Value* self) {
  std::string path;
  while (module != self) {
    const jit::Node* read = module->node();
    if (read->kind() != c10::prim::GetAttr) return "?";
    const std::string& name = read->s(c10::attr::name);
    path = path.empty() ? name : name + "." + path;
    module = read->input(0);
  }
  return path;
}

// A module attribute (parameter or buffer), or a tensor constant (frozen weights).
bool IsWeightRead(const jit::Value* value) {
  const c10::Symbol producer = value->node()->kind();
  return IsTensor(value) && (producer == c10::prim::GetAttr || producer == c10::prim::Constant);
}

// The input of weighted op `op` (weighted_ops.h; nullptr: none) at `node` that is a
// weight, or -1.
int WeightInput(const jit::Node* node, const WeightedOp* op) {
  if (op == nullptr) return -1;
  const auto operand = [&](int index) -> const jit::Value* {
    return static_cast<size_t>(index) < node->inputs().size() ? node->input(static_cast<size_t>(index))
                                                              : nullptr;
  };
  const jit::Value* second = operand(op->second_operand);
  if (op->positional_weight) return second != nullptr && IsTensor(second) ? op->second_operand : -1;
  if (second != nullptr && IsWeightRead(second)) return op->second_operand;
  const jit::Value* first = operand(op->first_operand);
  return first != nullptr && IsWeightRead(first) ? op->first_operand : -1;
}

// True when schema entry `index` of `entries` is missing or carries an alias annotation
// (a view or an in-place result), which a replacing hook would detach from its base.
bool AliasesOrUnknown(const std::vector<c10::Argument>& entries, size_t index) {
  return index >= entries.size() || entries[index].alias_info() != nullptr;
}

// An in-place op on its input 0 ("self", Tensor(a!)) that returns it (Tensor(a!)): add_,
// mul_, copy_, clamp_, masked_fill_; not resize_ or set_, whose results hold no values of
// their own.
bool WritesInput0(const c10::FunctionSchema& schema) {
  const auto writes = [](const c10::Argument& a) {
    return a.alias_info() != nullptr && a.alias_info()->isWrite();
  };
  const std::string& name = schema.name();
  return !schema.arguments().empty() && schema.arguments()[0].name() == "self" &&
         writes(schema.arguments()[0]) && schema.returns().size() == 1 && writes(schema.returns()[0]) &&
         name != "aten::resize_" && name != "aten::resize_as_" && name != "aten::set_";
}

NodePlan PlanModuleCall(jit::Node* call, const jit::Value* self) {
  NodePlan plan;
  plan.node = call;
  plan.site.kind = Kind::kModuleCall;
  plan.site.callee = RelativeModulePath(call->input(0), self);
  plan.site.op = call->s(c10::attr::name);
  for (size_t i = 1; i < call->inputs().size(); ++i) {
    if (IsTensor(call->input(i))) plan.inputs.push_back(i);
  }
  for (size_t i = 0; i < call->outputs().size(); ++i) {
    if (IsTensor(call->output(i))) plan.outputs.push_back(i);
    const auto tuple = call->output(i)->type()->cast<c10::TupleType>();
    if (!tuple) continue;
    NodePlan::TupleOutput hooked{i, {}};
    for (size_t j = 0; j < tuple->elements().size(); ++j) {
      if (tuple->elements()[j]->kind() == c10::TypeKind::TensorType) hooked.tensor_elements.push_back(j);
    }
    if (!hooked.tensor_elements.empty()) plan.tuple_outputs.push_back(std::move(hooked));
  }
  return plan;
}

// aten::to and aten::type_as: they return their input when the dtype does not change.
bool IsDtypeConversion(c10::Symbol kind) {
  static const c10::Symbol to = c10::Symbol::fromQualString("aten::to");
  static const c10::Symbol type_as = c10::Symbol::fromQualString("aten::type_as");
  return kind == to || kind == type_as;
}

bool IsTensorList(const jit::Value* value) {
  const auto list = value->type()->cast<c10::ListType>();
  return list && list->getElementType()->kind() == c10::TypeKind::TensorType;
}

// Whether the dtype `value` is one of values written in the model (constants, module
// attributes, tensors' dtypes) chosen by ifs; each prim::dtype(v) among them is appended
// to `reads`.
bool IsWrittenDtype(jit::Value* value, std::vector<jit::Node*>& reads, int depth = 0) {
  constexpr int kMaxNestedIfs = 8;
  jit::Node* producer = value->node();
  if (producer->kind() == c10::prim::Constant || producer->kind() == c10::prim::GetAttr) return true;
  if (producer->kind() == c10::prim::dtype) {
    if (!IsTensor(producer->input(0))) return false;
    reads.push_back(producer);
    return true;
  }
  if (producer->kind() != c10::prim::If || depth >= kMaxNestedIfs) return false;
  for (jit::Block* branch : producer->blocks()) {
    if (!IsWrittenDtype(branch->outputs().at(value->offset()), reads, depth + 1)) return false;
  }
  return true;
}

// Sets site.dtype_argument from the node's argument named "dtype"; a dtype read from a
// tensor at run time (prim::dtype(v)) gets v hooked.
void PlanDtypeArgument(const c10::FunctionSchema& schema, NodePlan& plan) {
  const c10::optional<int> index = schema.argumentIndexWithName("dtype");
  if (!index || static_cast<size_t>(*index) >= plan.node->inputs().size()) return;
  jit::Value* dtype = plan.node->input(static_cast<size_t>(*index));
  jit::Node* producer = dtype->node();
  if (producer->kind() == c10::prim::Constant) {
    const c10::optional<c10::IValue> value = jit::toIValue(dtype);
    if (value && value->isInt()) {
      plan.site.dtype_argument = GraphSite::DtypeArgument::kConstant;
      plan.site.dtype_constant = static_cast<c10::ScalarType>(value->toInt());
    }
    return;
  }
  std::vector<jit::Node*> reads;
  if (!IsWrittenDtype(dtype, reads)) {
    plan.site.dtype_argument = GraphSite::DtypeArgument::kDynamic;
    return;
  }
  plan.site.dtype_argument = GraphSite::DtypeArgument::kWritten;
  for (jit::Node* read : reads) plan.feeder_inputs.push_back({read, 0, kDtypeSourceInput});
}

// Sets site.fill_constant from the Scalar argument "value" of a fill (masked_fill with a
// number, fill_) when it is a graph constant.
void PlanFillConstant(const c10::FunctionSchema& schema, NodePlan& plan) {
  const std::string& op = plan.site.op;
  if (op != "aten::masked_fill" && op != "aten::masked_fill_" && op != "aten::fill_") return;
  const c10::optional<int> index = schema.argumentIndexWithName("value");
  if (!index || static_cast<size_t>(*index) >= plan.node->inputs().size()) return;
  const c10::optional<c10::IValue> value = jit::toIValue(plan.node->input(static_cast<size_t>(*index)));
  if (value && value->isDouble()) plan.site.fill_constant = value->toDouble();
  if (value && value->isInt()) plan.site.fill_constant = static_cast<double>(value->toInt());
}

// Plans a `before` on each tensor element of the lists (built by prim::ListConstruct)
// the node consumes; marks the site when another list has elements none can be planned on.
void PlanListElements(NodePlan& plan) {
  for (jit::Value* input : plan.node->inputs()) {
    if (!IsTensorList(input)) continue;
    if (input->node()->kind() != c10::prim::ListConstruct) {
      plan.site.unhooked_list_input = true;
      continue;
    }
    jit::Node* list = input->node();
    for (size_t i = 0; i < list->inputs().size(); ++i) {
      if (IsTensor(list->input(i))) plan.feeder_inputs.push_back({list, i, kListElementInput});
    }
  }
}

// Ops that view their input 0 where they can and copy it where they cannot.
bool IsCopyingView(c10::Symbol kind) {
  static const std::unordered_set<c10::Symbol> ops = {
      c10::Symbol::fromQualString("aten::reshape"), c10::Symbol::fromQualString("aten::reshape_as"),
      c10::Symbol::fromQualString("aten::flatten"), c10::Symbol::fromQualString("aten::contiguous")};
  return ops.count(kind) > 0;
}

// Plans the hooks of an aten op with a floating (or unknown-dtype) tensor input or
// output; nullopt for other nodes. The plan has no hooks when every tensor aliases.
c10::optional<NodePlan> PlanOp(jit::Node* node) {
  if (!node->kind().is_aten() || !HasFloatingTensor(node)) return c10::nullopt;
  NodePlan plan;
  plan.node = node;
  plan.site.kind = Kind::kOp;
  plan.site.op = node->kind().toQualString();
  const c10::FunctionSchema* schema = node->maybeSchema();
  if (schema == nullptr) return plan;
  if (IsCopyingView(node->kind()) && IsTensor(node->input(0)) && node->outputs().size() == 1 &&
      IsTensor(node->output(0))) {
    plan.site.kind = Kind::kCopyingView;
    plan.inputs = {0};
    plan.outputs = {0};
    return plan;
  }
  const bool conversion = IsDtypeConversion(node->kind());
  plan.site.weighted = FindWeightedOp(plan.site.op);
  plan.site.weight_input = WeightInput(node, plan.site.weighted);
  for (size_t i = 0; i < node->inputs().size(); ++i) {
    // Optional tensors too: a scripted norm's weight and bias reach aten::group_norm as
    // Tensor? (an op island casts them with the input; dtype propagation sees them).
    const bool tensor = IsTensor(node->input(i)) || IsOptionalTensor(node->input(i));
    if (tensor && (!AliasesOrUnknown(schema->arguments(), i) || (conversion && i == 0))) {
      plan.inputs.push_back(i);
    }
  }
  plan.site.in_place = WritesInput0(*schema) && node->outputs().size() == 1 && IsTensor(node->output(0));
  for (size_t i = 0; i < node->outputs().size(); ++i) {
    if (IsTensor(node->output(i)) &&
        (!AliasesOrUnknown(schema->returns(), i) || (i == 0 && (conversion || plan.site.in_place)))) {
      plan.outputs.push_back(i);
    }
  }
  PlanDtypeArgument(*schema, plan);
  PlanFillConstant(*schema, plan);
  PlanListElements(plan);
  return plan;
}

bool HasInlinedSubmodules(const jit::Module& module) {
  const c10::optional<jit::Method> forward = module.find_method("forward");
  const auto children = module.children();
  const bool has_children = children.begin() != children.end();
  return has_children && forward && !HasModuleCall(forward->graph()->block());
}

// The graph a prim::CallFunction, or a prim::CallMethod of a script class (not a
// module), runs; nullptr when it cannot be known before run time.
std::shared_ptr<jit::Graph> CalleeGraph(const jit::Node* call) {
  jit::Function* callee = nullptr;
  if (call->kind() == c10::prim::CallFunction) {
    if (const auto type = call->input(0)->type()->cast<c10::FunctionType>()) {
      callee = type->function();
    }
  } else if (const auto type = call->input(0)->type()->cast<c10::ClassType>()) {
    callee = type->findMethod(call->s(c10::attr::name));
  }
  if (callee == nullptr) return nullptr;
  const jit::GraphFunction* graph_function = jit::tryToGraphFunction(*callee);
  return graph_function == nullptr ? nullptr : graph_function->graph();
}

// Plans the hooks of a module's graphs: the methods of it and of every submodule, then
// the functions (and script-class methods) they call, whose ops run under the caller's
// path; each distinct graph once.
class HookPlanner {
 public:
  HookPlanner(SdpaKernel sdpa, InstrumentationCoverage& coverage, std::vector<at::Tensor>& tensor_constants)
      : sdpa_(sdpa), coverage_(coverage), tensor_constants_(tensor_constants) {}

  std::vector<NodePlan> PlanModule(const jit::Module& module) {
    for (const jit::Module& submodule : module.modules()) {
      if (HasInlinedSubmodules(submodule)) coverage_.submodules_inlined = true;
      for (const jit::Method& method : submodule.get_methods()) {
        const std::shared_ptr<jit::Graph> graph = method.graph();
        PlanGraph(*graph, graph->inputs().empty() ? nullptr : graph->inputs()[0]);
      }
    }
    while (!called_graphs_.empty()) {
      const std::shared_ptr<jit::Graph> graph = called_graphs_.back();
      called_graphs_.pop_back();
      PlanGraph(*graph, /*self=*/nullptr);
    }
    return std::move(plans_);
  }

 private:
  // Plans one graph (nested blocks included) unless it was planned already. `self`
  // is the module input of a method graph, nullptr for functions.
  void PlanGraph(jit::Graph& graph, const jit::Value* self) {
    if (!planned_.insert(&graph).second) return;
    CollectTensorConstants(graph.block());  // the package's own, before unfusing adds any
    UnfusedCount unfused;
    UnfuseFastPaths(graph.block(), sdpa_, unfused);
    coverage_.fused_ops_unfused += unfused.unfused;
    coverage_.fused_ops_left += unfused.left_fused;
    coverage_.attention_kernels_kept += unfused.kept;
    std::vector<jit::Node*> nodes;
    CollectNodes(graph.block(), nodes);
    for (jit::Node* node : nodes) {
      if (node->kind() == c10::prim::dtype) ComparedDtypeIsHeld(node);
      PlanNode(node, self);
    }
    ++coverage_.graphs;
  }

  // `x.dtype` where the model compares it (==, !=, in): the held dtype instead, so that a
  // branch on it goes where a real run under the policy goes (an FP16 emulation holds FP16
  // values in float32). Where the dtype is an argument (x.to(y.dtype)) it stays x's own.
  static void ComparedDtypeIsHeld(jit::Node* dtype) {
    static const c10::Symbol held = OpSymbol(kHeldDtypeSchema);
    static const std::unordered_set<c10::Symbol> compares = {
        c10::aten::eq, c10::aten::ne, c10::Symbol::fromQualString("aten::__contains__"),
        c10::Symbol::fromQualString("aten::__is__"), c10::Symbol::fromQualString("aten::__isnot__")};
    if (!IsTensor(dtype->input(0))) return;
    jit::Value* held_value = nullptr;
    const std::vector<jit::Use> uses = dtype->output()->uses();  // a copy: the loop changes them
    for (const jit::Use& use : uses) {
      if (compares.count(use.user->kind()) == 0) continue;
      if (held_value == nullptr) {
        jit::Graph& graph = *dtype->owningGraph();
        jit::Node* call = graph.create(held, {dtype->input(0), dtype->output()}, 1);
        call->output()->setType(c10::IntType::get());
        call->insertAfter(dtype);
        held_value = call->output();
      }
      use.user->replaceInput(use.offset, held_value);
    }
  }

  void CollectTensorConstants(jit::Block* block) {
    std::vector<jit::Node*> nodes;
    CollectNodes(block, nodes);
    for (const jit::Node* node : nodes) {
      if (node->kind() != c10::prim::Constant || !IsTensor(node->output())) continue;
      const c10::optional<c10::IValue> value = jit::toIValue(node->output());
      if (value && value->isTensor()) tensor_constants_.push_back(value->toTensor());
    }
  }

  void PlanNode(jit::Node* node, const jit::Value* self) {
    const c10::Symbol kind = node->kind();
    if (kind == c10::prim::CallMethod && IsModuleValue(node->input(0))) {
      plans_.push_back(PlanModuleCall(node, self));
      ++coverage_.module_calls;
    } else if (kind == c10::prim::CallMethod || kind == c10::prim::CallFunction) {
      std::shared_ptr<jit::Graph> callee = CalleeGraph(node);
      if (callee == nullptr) {
        ++coverage_.function_calls;
      } else {
        called_graphs_.push_back(std::move(callee));
      }
    } else if (c10::optional<NodePlan> plan = PlanOp(node)) {
      AddOpPlan(std::move(*plan));
    }
  }

  void AddOpPlan(NodePlan plan) {
    if (plan.inputs.empty() && plan.outputs.empty()) {
      ++coverage_.unobserved_ops;
      return;
    }
    const int weight = plan.site.weight_input;
    if (weight >= 0 && plan.node->input(weight)->node()->kind() == c10::prim::Constant) {
      plan.site.weight_is_constant = true;
      coverage_.submodules_inlined = true;  // weights folded into the graph: frozen
    }
    ++coverage_.ops;
    plans_.push_back(std::move(plan));
  }

  const SdpaKernel sdpa_;
  InstrumentationCoverage& coverage_;
  std::vector<at::Tensor>& tensor_constants_;
  std::vector<NodePlan> plans_;
  std::unordered_set<const jit::Graph*> planned_;
  std::vector<std::shared_ptr<jit::Graph>> called_graphs_;  // not planned yet
};

// Creates (does not insert) a call of `op` on `tensor` (nullptr: none) and the slot id,
// whose constant goes right before `node`.
jit::Node* CreateHookCall(c10::Symbol op, jit::Value* tensor, int64_t slot, jit::Node* node) {
  jit::Graph& graph = *node->owningGraph();
  jit::WithInsertPoint at_node(node);
  jit::Value* slot_value = graph.insertConstant(slot);
  std::vector<jit::Value*> inputs;
  if (tensor != nullptr) inputs.push_back(tensor);
  inputs.push_back(slot_value);
  jit::Node* call = graph.create(op, inputs, tensor != nullptr ? 1 : 0);
  // The observer may change the dtype: declare an unspecialized Tensor.
  if (tensor != nullptr) {
    call->output()->setType(IsOptionalTensor(tensor) ? tensor->type() : c10::TensorType::get());
  }
  return call;
}

void InsertBefores(const NodePlan& plan, int site, SiteTable& table) {
  static const c10::Symbol before = OpSymbol(kBeforeSchema);
  for (const NodePlan::FeederInput& feeder : plan.feeder_inputs) {
    const int64_t slot = table.AddSlot(site, feeder.io_index);
    jit::Node* call = CreateHookCall(before, feeder.feeder->input(feeder.input), slot, feeder.feeder);
    call->insertBefore(feeder.feeder);
    feeder.feeder->replaceInput(feeder.input, call->output());
  }
  static const c10::Symbol before_optional = OpSymbol(kBeforeOptionalSchema);
  for (size_t i : plan.inputs) {
    const int64_t slot = table.AddSlot(site, static_cast<int>(i));
    jit::Value* input = plan.node->input(i);
    jit::Node* call =
        CreateHookCall(IsOptionalTensor(input) ? before_optional : before, input, slot, plan.node);
    call->insertBefore(plan.node);
    plan.node->replaceInput(i, call->output());
  }
}

// Returns the last node inserted after plan.node (plan.node itself when none).
jit::Node* InsertAfters(const NodePlan& plan, int site, SiteTable& table) {
  static const c10::Symbol after = OpSymbol(kAfterSchema);
  jit::Node* last = plan.node;
  for (size_t i : plan.outputs) {
    jit::Value* output = plan.node->output(i);
    const int64_t slot = table.AddSlot(site, static_cast<int>(i));
    jit::Node* call = CreateHookCall(after, output, slot, plan.node);
    call->insertAfter(last);
    output->replaceAllUsesWith(call->output());
    call->replaceInput(0, output);  // the one use that must stay
    last = call;
  }
  // A tuple: unpacked, its tensors hooked, packed again for the users.
  int element_index = static_cast<int>(plan.node->outputs().size());
  for (const NodePlan::TupleOutput& hooked : plan.tuple_outputs) {
    jit::Value* tuple = plan.node->output(hooked.output);
    jit::Graph& graph = *plan.node->owningGraph();
    jit::Node* unpack = graph.createTupleUnpack(tuple);
    unpack->insertAfter(last);
    last = unpack;
    std::vector<jit::Value*> elements(unpack->outputs().begin(), unpack->outputs().end());
    for (size_t j : hooked.tensor_elements) {
      jit::Node* call = CreateHookCall(after, elements[j], table.AddSlot(site, element_index++), plan.node);
      call->insertAfter(last);
      last = call;
      elements[j] = call->output();
    }
    const c10::TupleTypePtr type = tuple->type()->expect<c10::TupleType>();
    jit::Node* pack =
        graph.createTuple(elements, type->schema() ? type : nullptr);  // a NamedTuple keeps its type
    pack->insertAfter(last);
    last = pack;
    tuple->replaceAllUsesWith(pack->output());
    unpack->replaceInput(0, tuple);  // the one use that must stay
  }
  return last;
}

// Inserts, in this order: befores, enter_module, the node, afters, exit_module.
void InsertHooks(const NodePlan& plan, SiteTable& table) {
  static const c10::Symbol enter = OpSymbol(kEnterSchema);
  static const c10::Symbol exit = OpSymbol(kExitSchema);
  const int site = table.AddSite(plan.site);
  const bool module_call = plan.site.kind == Kind::kModuleCall;
  InsertBefores(plan, site, table);
  if (module_call) {
    CreateHookCall(enter, nullptr, table.AddSlot(site, -1), plan.node)->insertBefore(plan.node);
  }
  jit::Node* last = InsertAfters(plan, site, table);
  if (module_call) {
    CreateHookCall(exit, nullptr, table.AddSlot(site, -1), plan.node)->insertAfter(last);
  }
}

std::string CountOf(int count, const std::string& noun) {
  return std::to_string(count) + " " + noun + (count == 1 ? "" : "s");
}

std::string JoinPath(const std::string& parent, const std::string& child) {
  if (child.empty()) return parent;
  if (parent.empty()) return child;
  return parent + "." + child;
}

}  // namespace

// The sites of one instrumentation and its run-time call stack; the custom ops' kernels
// read the thread's active State.
struct GraphInstrumentation::State {
  std::string root_path;
  SiteTable table;
  std::vector<std::string> call_stack;  // full paths of the calls entered, innermost last
  const GraphSite* last_op = nullptr;   // into table.sites

  const std::string& CurrentPath() const { return call_stack.empty() ? root_path : call_stack.back(); }
  const GraphSite& SiteOf(const HookSlot& slot) const { return table.sites[static_cast<size_t>(slot.site)]; }

  static thread_local State* active;
  static thread_local GraphObserver* active_observer;

  // The active instrumentation's slot `id`; nullptr when no scope is active or another
  // instrumentation owns the slot (the op then passes its value through).
  static const HookSlot* FindActiveSlot(int64_t id) {
    return active == nullptr ? nullptr : active->table.Find(id);
  }
  static at::Tensor Before(at::Tensor value, int64_t slot_id);
  static c10::optional<at::Tensor> BeforeOptional(c10::optional<at::Tensor> value, int64_t slot_id);
  static at::Tensor After(at::Tensor value, int64_t slot_id);
  static int64_t HeldDtype(at::Tensor value, int64_t dtype);
  static void EnterModule(int64_t slot_id);
  static void ExitModule(int64_t slot_id);
  // Registers the custom ops on the first call; throws c10::Error if that fails.
  static void RegisterOpsOnce();
};

thread_local GraphInstrumentation::State* GraphInstrumentation::State::active = nullptr;
thread_local GraphObserver* GraphInstrumentation::State::active_observer = nullptr;

at::Tensor GraphInstrumentation::State::Before(at::Tensor value, int64_t slot_id) {
  const HookSlot* slot = FindActiveSlot(slot_id);
  if (slot == nullptr) return value;
  const GraphSite& site = active->SiteOf(*slot);
  if (site.kind == Kind::kOp) active->last_op = &site;
  at::Tensor result = active_observer->Before(active->CurrentPath(), site, slot->io_index, value);
  TORCH_CHECK(result.defined(), "GraphObserver::Before returned no tensor for ", site.op);
  return result;
}

c10::optional<at::Tensor> GraphInstrumentation::State::BeforeOptional(c10::optional<at::Tensor> value,
                                                                      int64_t slot_id) {
  if (!value.has_value() || !value->defined()) return value;
  return Before(*value, slot_id);
}

at::Tensor GraphInstrumentation::State::After(at::Tensor value, int64_t slot_id) {
  const HookSlot* slot = FindActiveSlot(slot_id);
  // An output an op leaves undefined (the attention weights of
  // _native_multi_head_attention without need_weights) holds no value to observe.
  if (slot == nullptr || !value.defined()) return value;
  const GraphSite& site = active->SiteOf(*slot);
  at::Tensor result = active_observer->After(active->CurrentPath(), site, slot->io_index, value);
  TORCH_CHECK(result.defined(), "GraphObserver::After returned no tensor for ", site.op);
  return result;
}

int64_t GraphInstrumentation::State::HeldDtype(at::Tensor value, int64_t dtype) {
  if (active_observer == nullptr || !value.defined()) return dtype;
  return static_cast<int64_t>(active_observer->HeldDtype(value));
}

void GraphInstrumentation::State::EnterModule(int64_t slot_id) {
  const HookSlot* slot = FindActiveSlot(slot_id);
  if (slot == nullptr) return;
  std::string callee_path = JoinPath(active->CurrentPath(), active->SiteOf(*slot).callee);
  active->call_stack.push_back(std::move(callee_path));
}

void GraphInstrumentation::State::ExitModule(int64_t slot_id) {
  if (FindActiveSlot(slot_id) == nullptr || active->call_stack.empty()) return;
  active->call_stack.pop_back();
}

void GraphInstrumentation::State::RegisterOpsOnce() {
  // CONSERVATIVE: the ops count as side effects, so no pass removes or reorders them.
  // (Options cannot be moved: each registration builds its own.)
  constexpr c10::AliasAnalysisKind kConservative = c10::AliasAnalysisKind::CONSERVATIVE;
  using Registry = torch::RegisterOperators;
  static const Registry registry =
      Registry()
          .op(kBeforeSchema, &State::Before, Registry::options().aliasAnalysis(kConservative))
          .op(kBeforeOptionalSchema, &State::BeforeOptional, Registry::options().aliasAnalysis(kConservative))
          .op(kAfterSchema, &State::After, Registry::options().aliasAnalysis(kConservative))
          .op(kHeldDtypeSchema, &State::HeldDtype, Registry::options().aliasAnalysis(kConservative))
          .op(kEnterSchema, &State::EnterModule, Registry::options().aliasAnalysis(kConservative))
          .op(kExitSchema, &State::ExitModule, Registry::options().aliasAnalysis(kConservative));
}

GraphInstrumentation::GraphInstrumentation() : state_(std::make_unique<State>()) {}

GraphInstrumentation::~GraphInstrumentation() = default;

std::unique_ptr<GraphInstrumentation> GraphInstrumentation::Instrument(torch::jit::Module& module,
                                                                       const std::string& root_path,
                                                                       SdpaKernel sdpa) {
  std::unique_ptr<GraphInstrumentation> instrumentation(new GraphInstrumentation());
  State& state = *instrumentation->state_;
  state.root_path = root_path;
  try {
    State::RegisterOpsOnce();
  } catch (const c10::Error&) {
    return instrumentation;  // graphs left untouched: nothing seen, coverage all zero
  }
  const std::vector<NodePlan> plans =
      HookPlanner(sdpa, instrumentation->coverage_, instrumentation->tensor_constants_).PlanModule(module);
  size_t slot_count = 0;
  for (const NodePlan& plan : plans) slot_count += plan.SlotCount();
  state.table.first_slot = next_slot_id.fetch_add(static_cast<int64_t>(slot_count));
  for (const NodePlan& plan : plans) InsertHooks(plan, state.table);
  assert(state.table.slots.size() == slot_count);
  return instrumentation;
}

GraphInstrumentation::ActiveScope::ActiveScope(GraphInstrumentation& instrumentation, GraphObserver& observer)
    : previous_state_(State::active), previous_observer_(State::active_observer) {
  instrumentation.ResetStack();
  State::active = instrumentation.state_.get();
  State::active_observer = &observer;
}

GraphInstrumentation::ActiveScope::~ActiveScope() {
  State::active = previous_state_;
  State::active_observer = previous_observer_;
}

std::string GraphInstrumentation::current_path() const { return state_->CurrentPath(); }

std::string GraphInstrumentation::last_op() const {
  return state_->last_op == nullptr ? std::string() : state_->last_op->op;
}

bool GraphInstrumentation::last_op_weight_is_constant() const {
  return state_->last_op != nullptr && state_->last_op->weight_is_constant;
}

void GraphInstrumentation::ResetStack() {
  state_->call_stack.clear();
  state_->last_op = nullptr;
}

std::string InstrumentationCoverage::Summary() const {
  std::string summary =
      CountOf(module_calls, "module call") + ", " + CountOf(ops, "op") + " in " + CountOf(graphs, "graph");
  if (function_calls > 0) {
    summary += "; " + CountOf(function_calls, "function call") + " not entered";
  }
  if (unobserved_ops > 0) {
    summary += "; " + CountOf(unobserved_ops, "view or in-place op") + " not observed";
  }
  if (fused_ops_unfused > 0) {
    summary += "; " + CountOf(fused_ops_unfused, "fused op") + " computed op by op";
  }
  if (fused_ops_left > 0) {
    summary += "; " + CountOf(fused_ops_left, "fused op") + " not seen inside";
  }
  if (attention_kernels_kept > 0) {
    summary += "; " + CountOf(attention_kernels_kept, "attention op") +
               " computed by the named backend's kernel, not seen inside";
  }
  if (submodules_inlined) {
    summary += "; submodules inlined: their ops are reported under the caller's path";
  }
  return summary;
}

ScopedPlainGraphExecution::ScopedPlainGraphExecution() : optimize_(torch::jit::getGraphExecutorOptimize()) {
  torch::jit::setGraphExecutorOptimize(false);
}

ScopedPlainGraphExecution::~ScopedPlainGraphExecution() { torch::jit::setGraphExecutorOptimize(optimize_); }

}  // namespace framegate
