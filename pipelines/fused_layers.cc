#include "pipelines/fused_layers.h"

#include <memory>
#include <vector>

#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/jit.h>

namespace framegate {
namespace {

namespace jit = torch::jit;

// The ops of LibTorch's CPU kernels of the two fused ops (1.13 and 2.x), argument for
// argument in their schemas' order; `mask` is None here.
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
)JIT";

// The function of kDecompositions that computes fused op `kind`; nullptr when `kind` is
// not one.
const char* DecompositionName(c10::Symbol kind) {
  static const c10::Symbol layer = c10::Symbol::fromQualString("aten::_transformer_encoder_layer_fwd");
  static const c10::Symbol attention = c10::Symbol::fromQualString("aten::_native_multi_head_attention");
  return kind == layer       ? "transformer_encoder_layer_fwd"
         : kind == attention ? "native_multi_head_attention"
                             : nullptr;
}

// The decomposition of fused op `kind`, inlined (no calls left), or nullptr.
std::shared_ptr<jit::Graph> DecompositionOf(c10::Symbol kind) {
  static const std::shared_ptr<jit::CompilationUnit> unit = torch::jit::compile(kDecompositions);
  const char* name = DecompositionName(kind);
  if (name == nullptr) return nullptr;
  std::shared_ptr<jit::Graph> graph = jit::toGraphFunction(unit->get_function(name)).graph()->copy();
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

// Replaces `fused` by the ops of its decomposition. False when it has a mask (or no
// decomposition matches its inputs), leaving it as it was.
bool Decompose(jit::Node* fused) {
  const std::shared_ptr<jit::Graph> decomposition = DecompositionOf(fused->kind());
  if (decomposition == nullptr || decomposition->inputs().size() != fused->inputs().size() ||
      decomposition->outputs().size() != fused->outputs().size()) {
    return false;
  }
  const c10::optional<int> mask = fused->schema().argumentIndexWithName("mask");
  if (!mask || !fused->input(static_cast<size_t>(*mask))->mustBeNone()) return false;
  jit::WithInsertPoint at_fused(fused);
  const std::vector<jit::Value*> outputs =
      jit::insertGraph(*fused->owningGraph(), *decomposition, fused->inputs());
  for (size_t i = 0; i < outputs.size(); ++i) fused->output(i)->replaceAllUsesWith(outputs[i]);
  fused->destroy();
  return true;
}

}  // namespace

void UnfuseFastPaths(jit::Block* block, UnfusedCount& count) {
  std::vector<jit::Node*> fused;
  for (jit::Node* node : block->nodes()) {
    for (jit::Block* nested : node->blocks()) UnfuseFastPaths(nested, count);
    if (DecompositionName(node->kind()) != nullptr) fused.push_back(node);
  }
  for (jit::Node* node : fused) {
    ++(Steer(node) || Decompose(node) ? count.unfused : count.left_fused);
  }
}

}  // namespace framegate
