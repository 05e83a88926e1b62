#include "pipelines/fused_layers.h"

#include <memory>
#include <utility>
#include <vector>

#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/jit.h>

#include "harness/torch_version.h"

namespace framegate {
namespace {

namespace jit = torch::jit;

// The ops of LibTorch's CPU kernels of the fused ops (1.13 and 2.x). A function's
// arguments are matched to the op's by name; an argument the op lacks (an older schema)
// takes the function's default.
constexpr char kDecompositions[] = R"JIT(
def native_multi_head_attention(query: Tensor, key: Tensor, value: Tensor, embed_dim: int, num_head: int,
                                qkv_weight: Tensor, qkv_bias: Tensor, proj_weight: Tensor, proj_bias: Tensor,
                                mask: Optional[Tensor], need_weights: bool, average_attn_weights: bool,
                                mask_type: Optional[int]) -> Tuple[Tensor, Tensor]:
    b = query.size(0)
    head_dim = embed_dim // num_head
    w = qkv_weight.chunk(3)
    bias = qkv_bias.chunk(3)
    q = torch.linear(query, w[0], bias[0]).reshape(b, -1, num_head, head_dim).transpose(1, 2)
    k = torch.linear(key, w[1], bias[1]).reshape(b, -1, num_head, head_dim).transpose(1, 2)
    v = torch.linear(value, w[2], bias[2]).reshape(b, -1, num_head, head_dim).transpose(1, 2)
    q = q * (1.0 / (float(head_dim) ** 0.5))
    attention = torch.softmax(torch.matmul(q, k.transpose(-2, -1)), -1)
    out = torch.matmul(attention, v).transpose(1, 2).reshape(b, -1, embed_dim)
    out = torch.linear(out, proj_weight, proj_bias)
    weights = torch.empty([0], dtype=out.dtype)
    if need_weights:
        weights = attention.mean(1) if average_attn_weights else attention
    return out, weights

def transformer_encoder_layer_fwd(src: Tensor, embed_dim: int, num_heads: int, qkv_weight: Tensor,
                                  qkv_bias: Tensor, proj_weight: Tensor, proj_bias: Tensor, use_gelu: bool,
                                  norm_first: bool, eps: float, norm_weight_1: Tensor, norm_bias_1: Tensor,
                                  norm_weight_2: Tensor, norm_bias_2: Tensor, ffn_weight_1: Tensor,
                                  ffn_bias_1: Tensor, ffn_weight_2: Tensor, ffn_bias_2: Tensor,
                                  mask: Optional[Tensor], mask_type: Optional[int]) -> Tensor:
    x = src
    if norm_first:
        x = torch.layer_norm(x, [embed_dim], norm_weight_1, norm_bias_1, eps)
    x = native_multi_head_attention(x, x, x, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight,
                                    proj_bias, mask, False, True, mask_type)[0] + src
    if not norm_first:
        x = torch.layer_norm(x, [embed_dim], norm_weight_1, norm_bias_1, eps)
    residual = x
    if norm_first:
        x = torch.layer_norm(x, [embed_dim], norm_weight_2, norm_bias_2, eps)
    hidden = torch.linear(x, ffn_weight_1, ffn_bias_1)
    if use_gelu:
        hidden = torch.gelu(hidden)
    else:
        hidden = torch.relu(hidden)
    x = torch.linear(hidden, ffn_weight_2, ffn_bias_2) + residual
    if not norm_first:
        x = torch.layer_norm(x, [embed_dim], norm_weight_2, norm_bias_2, eps)
    return x

# LibTorch 2.x's math path: q and k each scaled by the square root of the scale.
def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor, attn_mask: Optional[Tensor] = None,
                                 dropout_p: float = 0.0, is_causal: bool = False, scale: Optional[float] = None,
                                 enable_gqa: bool = False) -> Tensor:
    factor = 1.0 / (float(query.size(-1)) ** 0.5)
    if scale is not None:
        factor = scale
    root = abs(factor) ** 0.5
    q = query * (root if factor >= 0.0 else -root)
    if enable_gqa:
        key = key.repeat_interleave(query.size(-3) // key.size(-3), -3)
        value = value.repeat_interleave(query.size(-3) // value.size(-3), -3)
    logits = torch.matmul(q, key.transpose(-2, -1) * root)
    attention = masked_softmax(logits, attn_mask, is_causal)
    if dropout_p > 0.0:
        attention = torch.dropout(attention, dropout_p, True)
    return torch.matmul(attention, value)

# LibTorch 1.13's private op: q scaled by the whole scale; the weights returned on request.
def scaled_dot_product_attention_1_13(query: Tensor, key: Tensor, value: Tensor,
                                      attn_mask: Optional[Tensor] = None, dropout_p: float = 0.0,
                                      need_attn_weights: bool = False,
                                      is_causal: bool = False) -> Tuple[Tensor, Tensor]:
    q = query / (float(query.size(-1)) ** 0.5)
    attention = masked_softmax(torch.matmul(q, key.transpose(-2, -1)), attn_mask, is_causal)
    if dropout_p > 0.0:
        attention = torch.dropout(attention, dropout_p, True)
    out = torch.matmul(attention, value)
    weights = torch.empty([0], dtype=out.dtype)
    if need_attn_weights:
        weights = attention
    return out, weights

# Softmax over the last dim after the causal and the given mask (bool: False is masked out;
# else added); a row masked out entirely is 0, as LibTorch's safe softmax makes it.
def masked_softmax(logits: Tensor, attn_mask: Optional[Tensor], is_causal: bool) -> Tensor:
    masked = is_causal or attn_mask is not None
    if is_causal:
        logits = logits.masked_fill(torch.ones_like(logits).tril() == 0.0, float("-inf"))
    if attn_mask is not None:
        if attn_mask.is_floating_point():
            logits = logits + attn_mask
        else:
            logits = logits.masked_fill(attn_mask.logical_not(), float("-inf"))
    attention = torch.softmax(logits, -1)
    if masked:
        attention = attention.masked_fill((logits == float("-inf")).all(-1, True), 0.0)
    return attention

# LibTorch before 2.1 (pytorch/pytorch#96037): baddbmm's CPU kernel scales its uninitialised
# output by beta, so with beta 0 whatever that memory held (NaN, Inf) comes out, now and
# then; with beta 0 the product is added to a zeroed output instead, as beta 0 promises.
def baddbmm(self: Tensor, batch1: Tensor, batch2: Tensor, beta: number = 1, alpha: number = 1) -> Tensor:
    if beta == 0:
        zero = batch1.new_zeros([batch1.size(0), batch1.size(1), batch2.size(2)])
        return torch.baddbmm(zero, batch1, batch2, beta=1, alpha=alpha)
    return torch.baddbmm(self, batch1, batch2, beta=beta, alpha=alpha)
)JIT";

// A fused op (or an op whose kernel is wrong in this LibTorch) and the function of
// kDecompositions that computes it.
struct FusedOp {
  const char* op;
  const char* function;
  bool steerable;      // torch.nn's fast path: called inside `if <every condition holds>:`
  bool maskless;       // decomposed only when its `mask` is None
  bool attention;      // scaled-dot-product attention: kept under SdpaKernel::kKept
  bool kernel_repair;  // not fused: an op whose kernel is repaired, not counted
};
constexpr FusedOp kFusedOps[] = {
    {"aten::_transformer_encoder_layer_fwd", "transformer_encoder_layer_fwd", true, true, false, false},
    {"aten::_native_multi_head_attention", "native_multi_head_attention", true, true, false, false},
    {"aten::scaled_dot_product_attention", "scaled_dot_product_attention", false, false, true, false},
    {"aten::_scaled_dot_product_attention", "scaled_dot_product_attention_1_13", false, false, true, false},
#if !FRAMEGATE_TORCH_AT_LEAST(2, 1)
    {"aten::baddbmm", "baddbmm", false, false, false, true},
#endif
};

// The entry of `kind`, or nullptr.
const FusedOp* FindFusedOp(c10::Symbol kind) {
  for (const FusedOp& fused : kFusedOps) {
    if (kind == c10::Symbol::fromQualString(fused.op)) return &fused;
  }
  return nullptr;
}

const jit::CompilationUnit& Decompositions() {
  static const std::shared_ptr<jit::CompilationUnit> unit = torch::jit::compile(kDecompositions);
  return *unit;
}

// The decomposition `function`, inlined (no calls left).
std::shared_ptr<jit::Graph> DecompositionOf(const char* function) {
  std::shared_ptr<jit::Graph> graph =
      jit::toGraphFunction(Decompositions().get_function(function)).graph()->copy();
  jit::Inline(*graph);
  // A tuple returned becomes the op's outputs, one by one.
  jit::Node* tuple = graph->outputs().size() == 1 ? graph->outputs()[0]->node() : nullptr;
  if (tuple != nullptr && tuple->kind() == c10::prim::TupleConstruct) {
    graph->eraseOutput(0);
    for (jit::Value* element : tuple->inputs()) graph->registerOutput(element);
    tuple->destroy();
  }
  return graph;
}

// torch.nn's code takes a fast path inside `if <every condition holds>:` and falls through
// to the layer's own ops otherwise. Returns false when `fused` is not in such a branch.
bool Steer(jit::Node* fused) {
  jit::Block* branch = fused->owningBlock();
  jit::Node* if_node = branch->owningNode();
  if (if_node == nullptr || if_node->kind() != c10::prim::If || if_node->blocks()[0] != branch) return false;
  jit::WithInsertPoint before_if(if_node);
  if_node->replaceInput(0, if_node->owningGraph()->insertConstant(false));
  return true;
}

// The values `fused` gives the arguments of its decomposition, matched by name; an
// argument `fused` lacks takes the decomposition's default (a constant inserted at the
// insertion point). Empty, with nothing inserted, when some argument of `fused` has no
// counterpart (a newer schema) or one has neither value nor default.
std::vector<jit::Value*> DecompositionInputs(jit::Node* fused, const c10::FunctionSchema& decomposition) {
  const c10::FunctionSchema& schema = fused->schema();
  for (const c10::Argument& argument : schema.arguments()) {
    if (!decomposition.argumentIndexWithName(argument.name())) return {};
  }
  for (const c10::Argument& argument : decomposition.arguments()) {
    if (!schema.argumentIndexWithName(argument.name()) && !argument.default_value()) return {};
  }
  std::vector<jit::Value*> inputs;
  for (const c10::Argument& argument : decomposition.arguments()) {
    const c10::optional<int> index = schema.argumentIndexWithName(argument.name());
    inputs.push_back(index ? fused->input(static_cast<size_t>(*index))
                           : fused->owningGraph()->insertConstant(*argument.default_value()));
  }
  return inputs;
}

// Replaces `fused` by the ops of its decomposition. False when it must keep its mask (or
// no decomposition matches its arguments), leaving it as it was.
bool Decompose(jit::Node* fused, const FusedOp& entry) {
  if (entry.maskless) {
    const c10::optional<int> mask = fused->schema().argumentIndexWithName("mask");
    if (!mask || !fused->input(static_cast<size_t>(*mask))->mustBeNone()) return false;
  }
  const std::shared_ptr<jit::Graph> decomposition = DecompositionOf(entry.function);
  if (decomposition->outputs().size() != fused->outputs().size()) return false;
  jit::WithInsertPoint at_fused(fused);
  const std::vector<jit::Value*> inputs =
      DecompositionInputs(fused, Decompositions().get_function(entry.function).getSchema());
  if (inputs.empty()) return false;
  const std::vector<jit::Value*> outputs = jit::insertGraph(*fused->owningGraph(), *decomposition, inputs);
  for (size_t i = 0; i < outputs.size(); ++i) fused->output(i)->replaceAllUsesWith(outputs[i]);
  fused->destroy();
  return true;
}

}  // namespace

void UnfuseFastPaths(jit::Block* block, SdpaKernel sdpa, UnfusedCount& count) {
  std::vector<std::pair<jit::Node*, const FusedOp*>> fused;
  for (jit::Node* node : block->nodes()) {
    for (jit::Block* nested : node->blocks()) UnfuseFastPaths(nested, sdpa, count);
    const FusedOp* entry = FindFusedOp(node->kind());
    if (entry != nullptr && entry->attention && sdpa == SdpaKernel::kKept) {
      ++count.kept;
    } else if (entry != nullptr) {
      fused.emplace_back(node, entry);
    }
  }
  for (const auto& [node, entry] : fused) {
    if (entry->kernel_repair) {
      Decompose(node, *entry);
      continue;
    }
    ++((entry->steerable && Steer(node)) || Decompose(node, *entry) ? count.unfused : count.left_fused);
  }
}

}  // namespace framegate
