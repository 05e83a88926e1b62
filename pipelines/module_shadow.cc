#include "pipelines/module_shadow.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "pipelines/norm_ops.h"
#include "pipelines/op_islands.h"
#include "pipelines/weight_store.h"

namespace framegate {
namespace {

thread_local ModuleShadow* active_shadow = nullptr;

// The key of an op at `path` ("path\top"); a SiteKey adds "\tk", the call's ordinal.
std::string SiteName(const std::string& path, const std::string& op) { return path + "\t" + op; }

// The op a SiteName or SiteKey names.
OpSite SiteOfKey(const std::string& key) {
  const size_t tab = key.find('\t'), ordinal = key.find('\t', tab + 1);
  return {key.substr(0, tab),
          key.substr(tab + 1, ordinal == std::string::npos ? ordinal : ordinal - tab - 1)};
}

// The unit roundoff of a value held in `dtype`.
double UnitRoundoff(c10::ScalarType dtype) {
  switch (dtype) {
    case c10::kBFloat16:
      return std::ldexp(1.0, -8);
    case c10::kHalf:
      return std::ldexp(1.0, -11);
    case c10::kDouble:
      return std::ldexp(1.0, -53);
    default:
      return std::ldexp(1.0, -24);
  }
}

// The largest weight `storage` holds: FP8's largest finite value (beyond it a weight
// saturates); infinity for the others.
double LargestStored(WeightStorage storage) {
  const std::optional<Fp8Format> fp8 = Fp8FormatOf(storage);
  return fp8 ? Fp8MaxFinite(*fp8) : std::numeric_limits<double>::infinity();
}

// The relative error of a weight stored under `storage` (0 for float32).
double StorageError(WeightStorage storage) {
  switch (storage) {
    case WeightStorage::kFp8E4M3:
      return std::ldexp(1.0, -3);
    case WeightStorage::kFp8E5M2:
      return std::ldexp(1.0, -2);
    case WeightStorage::kBFloat16:
      return std::ldexp(1.0, -8);
    case WeightStorage::kFloat16:
      return std::ldexp(1.0, -11);
    default:
      return 0;
  }
}

bool Probed(const at::Tensor& value) { return value.defined() && value.is_floating_point(); }

// Whether `value` is a parameter of the loaded model (a leaf that requires grad).
bool IsParameter(const at::Tensor& value) { return value.is_leaf() && value.requires_grad(); }

// Whether `policy` computes (or emulates) in a dtype coarser than float32.
bool LowerCompute(const DtypePolicy& policy) { return policy.emulate_fp16 || policy.compute != c10::kFloat; }

// An op that reads only its input's shape, dtype and device (`torch.zeros_like(d)`): an
// error in the input's values does not reach it.
bool ReadsOnlyTheShape(const std::string& op) {
  static const std::set<std::string> ops = {
      "aten::zeros_like", "aten::ones_like", "aten::empty_like", "aten::full_like", "aten::rand_like",
      "aten::randn_like", "aten::new_zeros", "aten::new_ones",   "aten::new_empty", "aten::new_full",
      "aten::size",       "aten::dim",       "aten::numel"};
  return ops.count(op) > 0;
}

// An op whose output is uninitialised memory (`torch.empty`, which `baddbmm(..., beta=0)`
// ignores, as diffusers' attention scores do): its values are no result, and the next op's
// input from it is none either.
bool MakesUninitialised(const std::string& op) {
  return op == "aten::empty" || op == "aten::empty_like" || op == "aten::new_empty" ||
         op == "aten::empty_strided";
}

// Whether `op` is an elementwise sum that returns a new tensor (Maker::magnitude_origin).
bool IsSum(const std::string& op) { return op == "aten::add" || op == "aten::sub"; }

// An op that makes an index of one float value (a cast, `t.long()`, `t.to(torch.int64)`;
// a bucket of it, `torch.bucketize(t, bounds)`, `torch.searchsorted(bounds, t)`): an index
// it makes that differs from the FP32 run's is that float rounded before it (a timestep
// rounded to BF16), not a choice among near-ties (argmax, topk, sort). `floor(t).long()`
// is a cast of floor's float output.
bool MakesAnIndexOfAFloat(const std::string& op) {
  return op == "aten::to" || op == "aten::_to_copy" || op == "aten::type_as" || op == "aten::bucketize" ||
         op == "aten::searchsorted";
}

// Whether `op`, given one float tensor (and constants), hands its value on with the rounding
// it was made with: a scale (`* 1.0`), a negation, a copy, a cast (IsolatedError::relays).
// Scaled by a scalar the model holds (`alpha * s` of a parameter), it is the model's arithmetic.
bool IsRelay(const std::string& op) {
  return op == "aten::mul" || op == "aten::div" || op == "aten::neg" || op == "aten::clone" ||
         op == "aten::contiguous" || op == "aten::to" || op == "aten::_to_copy" || op == "aten::type_as";
}

// Whether `op` is an elementwise sum or difference of its inputs (the sums a cancellation
// amplifies: ModuleShadow::SumSquares).
bool IsSumOrDifference(const std::string& op) { return IsSum(op) || op == "aten::rsub"; }

// Whether `op` made an offset or a mean that a difference after it may cancel: a sum (in
// place too) or a mean.
bool SumsOrAverages(const std::string& op) {
  return IsSumOrDifference(op) || op == "aten::add_" || op == "aten::sub_" || op == "aten::mean" ||
         op == "aten::sum";
}

double RootMeanSquare(const at::Tensor& value) {
  if (!value.defined() || value.numel() == 0 || !value.is_floating_point()) return 0;
  return std::sqrt(value.detach().to(at::kDouble).square().mean().item<double>());
}

// A norm's input offset ratio (IsolatedError::input_offset): root mean square over
// standard deviation, pooled over the rows the norm `op` normalises; 0 when undefined.
double OffsetRatio(const std::string& op, const at::Tensor& value) {
  if (value.dim() < 2 || value.numel() == 0) return 0;
  const at::Tensor x = value.detach().to(at::kDouble);
  const at::Tensor rows = op == "aten::layer_norm" ? x.reshape({-1, x.size(-1)}) : x.reshape({x.size(0), -1});
  const double square = rows.square().mean().item<double>();
  const double variance = (rows - rows.mean({1}, /*keepdim=*/true)).square().mean().item<double>();
  return variance > 0 && std::isfinite(square) ? std::sqrt(square / variance) : 0;
}

// The input of `op` that is a stored weight though `op` is no weighted op (weighted_ops.h):
// an embedding's table, a norm's affine weight (FP8 storage rounds them too); -1 for the
// others. A scripted nn.Embedding or nn.GroupNorm passes it through F.embedding or
// F.group_norm as an argument, so the graph does not show it is a module's attribute.
int StoredWeightInput(const std::string& op) { return op == "aten::embedding" ? 0 : NormWeightInput(op); }

bool IsSoftmax(const std::string& op) { return op == "aten::softmax" || op == "aten::_softmax"; }

// SoftmaxAmplification's sums over one call's logits `value` (softmax over the last
// dimension; -inf entries, masked keys, take no part).
ModuleShadow::LogitSums LogitSumsOf(const at::Tensor& value) {
  ModuleShadow::LogitSums sums;
  if (value.dim() < 1 || value.numel() == 0 || value.size(-1) < 2) return sums;
  const at::Tensor s = value.detach().to(at::kDouble).reshape({-1, value.size(-1)});
  const at::Tensor finite = at::isfinite(s);
  const at::Tensor zeros = at::zeros_like(s);
  const at::Tensor p = at::where(finite, at::softmax(s, 1), zeros);
  const at::Tensor logits = at::where(finite, s, zeros);
  const at::Tensor weights = p.square();
  const at::Tensor row_weight = weights.sum(1);
  const at::Tensor squares = weights * logits.square();
  const at::Tensor mean = logits.sum(1, /*keepdim=*/true) / finite.sum(1, /*keepdim=*/true).clamp_min(1);
  sums.amplified = ((squares * (1 - 2 * p)).sum(1) + row_weight * squares.sum(1)).sum().item<double>();
  sums.weights = row_weight.sum().item<double>();
  sums.squares = logits.square().sum().item<double>();
  sums.deviations = at::where(finite, (logits - mean).square(), zeros).sum().item<double>();
  return sums;
}

double AmplificationOf(const ModuleShadow::LogitSums& sums) {
  if (!(sums.weights > 0) || !(sums.deviations > 0) || !std::isfinite(sums.amplified)) return 0;
  if (std::sqrt(sums.squares / sums.deviations) >= kCancellingOffset) return 0;  // an offset it cancels
  return std::sqrt(std::max(0.0, sums.amplified / sums.weights));
}

}  // namespace

double SoftmaxAmplification(const at::Tensor& logits) { return AmplificationOf(LogitSumsOf(logits)); }

double ModuleShadow::AmplifiedRoundoff(const std::string& site_key, double input_roundoff) const {
  const ModuleShadow& record = reference_ != nullptr ? *reference_ : *this;
  const auto found = record.softmax_logits_.find(site_key);
  if (found != record.softmax_logits_.end()) return input_roundoff * AmplificationOf(found->second);
  const auto sum = record.sum_squares_.find(site_key);
  if (sum == record.sum_squares_.end() || sum->second.fed_by_a_sum || !(sum->second.outputs > 0)) return 0;
  const double k = std::sqrt(sum->second.inputs / sum->second.outputs);
  // Past kCancellingOffset, only a cancellation that leaves no bit of its output (its
  // inputs' rounding amplified to kLostOutput of it) is the op's.
  if (!std::isfinite(k) || (k >= kCancellingOffset && k * input_roundoff >= kLostOutput)) return 0;
  return input_roundoff * std::sqrt(1 + k * k);
}

void SortByExcess(std::vector<IsolatedError>& errors) {
  std::stable_sort(errors.begin(), errors.end(),
                   [](const IsolatedError& a, const IsolatedError& b) { return a.Excess() > b.Excess(); });
}

double IsolatedError::Excess() const {
  if (!std::isfinite(error) || saturated_weight > 0) return std::numeric_limits<double>::infinity();
  return predicted > 0 ? error / predicted : 0;
}

double PredictedError(const DtypePolicy& policy, const std::string& path, const std::string& op,
                      bool weighted) {
  if (InFp32Op(policy, path, op)) return UnitRoundoff(c10::kFloat);
  const double compute = UnitRoundoff(policy.emulate_fp16 ? c10::kHalf : policy.compute);
  if (!weighted) return compute;
  // Under fp8_weights = "linear-conv" a norm's or a product's stored weight is not FP8.
  const WeightedOp* layer = FindWeightedOp(op);
  if (Fp8FormatOf(policy.storage) && !policy.StoresInFp8(layer != nullptr && layer->positional_weight))
    return compute;
  return std::max(compute, StorageError(policy.storage));
}

ModuleShadow::ModuleShadow(Mode mode, std::set<int> steps, DtypePolicy policy, const ModuleShadow* reference,
                           int64_t max_bytes)
    : mode_(mode),
      steps_(std::move(steps)),
      policy_(std::move(policy)),
      reference_(reference),
      max_bytes_(max_bytes) {}

void ModuleShadow::Wrap(GraphObserver* inner, int step) {
  inner_ = inner != nullptr ? inner : &pass_through_;
  step_ = step;
  makers_.clear();  // a norm's input is made in the same forward
  island_entries_.clear();
  site_calls_.clear();
}

std::string ModuleShadow::Key(const std::string& path, const std::string& op, char direction, int index) {
  const std::string key =
      std::to_string(step_) + "|" + path + "|" + op + "|" + direction + std::to_string(index);
  return key + "#" + std::to_string(occurrences_[key]++);
}

at::Tensor ModuleShadow::Substitute(const at::Tensor& recorded, const at::Tensor& value, GraphObserver& inner,
                                    const c10::ScalarType* entered_as) {
  // An FP16 emulation holds `value` in float32 for FP16 (or keeps it float32); an
  // island's input was held in `entered_as` before it entered.
  const bool held_in_half = value.scalar_type() == at::kFloat && inner.HeldDtype(value) == at::kHalf;
  const c10::ScalarType dtype = entered_as != nullptr ? *entered_as
                                : held_in_half        ? at::kHalf
                                                      : value.scalar_type();
  at::Tensor out = recorded.to(value.device(), dtype, /*non_blocking=*/false, /*copy=*/true);
  if (dtype != value.scalar_type()) out = out.to(value.scalar_type());
  inner.HoldLike(out, value);
  return out;
}

at::Tensor ModuleShadow::Before(const std::string& path, const GraphSite& site, int input_index,
                                const at::Tensor& value) {
  GraphObserver& inner = inner_ != nullptr ? *inner_ : pass_through_;
  if (site.kind == GraphSite::Kind::kCopyingView && input_index == 0) {
    const Maker* maker = makers_.Find(value);
    copy_maker_ = maker != nullptr ? *maker : Maker{};
  }
  // Only a relay's inputs, at a probed step (where After keeps makers), are looked up.
  if (site.kind == GraphSite::Kind::kOp && IsRelay(site.op) && steps_.count(step_) > 0) {
    if (input_index == 0) relay_inputs_ = RelayInputs{};
    if (value.defined() && value.is_floating_point() && value.dim() > 0) {  // not a wrapped scalar
      ++relay_inputs_.floating;
      const Maker* maker = makers_.Find(value);
      relay_inputs_.source = maker != nullptr ? *maker : Maker{};
    } else if (value.defined() && value.is_floating_point() &&
               (IsParameter(value) || makers_.Find(value) != nullptr)) {
      relay_inputs_.scaled = true;  // by a parameter or a computed scalar: `alpha * s`
    }
  }
  // Only the recorded FP32 run's magnitude origins are read (RecordNormInput, carriers_).
  if (mode_ == Mode::kRecord && site.kind == GraphSite::Kind::kOp && IsSumOrDifference(site.op) &&
      steps_.count(step_) > 0 && Probed(value)) {
    if (input_index == 0) {
      sum_inputs_ = SumInputs{};
      pending_sum_ = SumSquares{};
    }
    const double rms = RootMeanSquare(value);
    const Maker* maker = makers_.Find(value);
    pending_sum_.inputs += rms * rms;
    pending_sum_.fed_by_a_sum =
        pending_sum_.fed_by_a_sum ||
        (maker != nullptr && (SumsOrAverages(maker->site.op) || !maker->relayed_sum.empty()));
    if (IsSum(site.op) && rms > sum_inputs_.rms) {
      sum_inputs_ = SumInputs{rms, maker != nullptr ? maker->magnitude_origin : OpSite{}};
    }
  }
  if (site.kind == GraphSite::Kind::kModuleCall) {
    const at::Tensor entered = inner.Before(path, site, input_index, value);
    if (mode_ == Mode::kCompare && entered.defined() && value.defined() && !entered.is_same(value) &&
        entered.scalar_type() == at::kFloat) {
      // A call into an FP32 island hands it a float32 copy of a value the run holds
      // rounded: the island's ops take that rounding (and whatever was done to the value)
      // with it, so they are fed the FP32 recording rounded alike, and the copy keeps its
      // maker for the made-input check.
      const c10::ScalarType held =
          value.scalar_type() == at::kFloat ? inner.HeldDtype(value) : value.scalar_type();
      if (held != at::kFloat) island_entries_.Put(entered, held);
      if (const Maker* maker = makers_.Find(value); maker != nullptr) makers_.Put(entered, *maker);
    }
    return entered;
  }
  // An in-place op's input 0 is not hooked, so its result is not its own error alone.
  if (site.kind != GraphSite::Kind::kOp || site.in_place || steps_.count(step_) == 0) {
    return inner.Before(path, site, input_index, value);
  }
  if (!Probed(value)) {
    if (value.defined() && !value.is_complex() && value.numel() > 0)
      NoteChoice(path, site, input_index, value);
    return inner.Before(path, site, input_index, value);
  }
  // A linear's or a convolution's bias is a stored weight as its weight is (FP8 storage
  // saturates a bias of 512 alike): never replaced by the FP32 run's.
  const bool bias = site.weighted != nullptr && site.weighted->positional_weight && site.weight_input >= 0 &&
                    input_index == site.weighted->bias;
  if (input_index == site.weight_input || input_index == StoredWeightInput(site.op) || bias ||
      IsParameter(value)) {  // a weight
    const std::string name = SiteKey(path, site.op, /*upcoming=*/true);
    const std::string input = name + "/" + std::to_string(input_index);
    if (mode_ == Mode::kRecord && value.numel() > 0) {  // the FP32 weights: their largest
      double& absmax = weight_absmax_[input];
      absmax = std::max(absmax, value.detach().abs().max().item<double>());
    } else if (mode_ == Mode::kCompare) {
      ErrorSums& sums = errors_[name];
      sums.weighted = true;
      // Under fp8_weights = "linear-conv" only a linear's or a convolution's weight is FP8.
      const bool linear_or_conv_weight =
          site.weighted != nullptr && site.weighted->positional_weight && input_index == site.weight_input;
      const auto recorded = reference_->weight_absmax_.find(input);
      if (recorded != reference_->weight_absmax_.end() && recorded->second > LargestStored(policy_.storage) &&
          !policy_.InFp32Module(path) && policy_.StoresInFp8(linear_or_conv_weight)) {
        sums.saturated_weight = std::max(sums.saturated_weight, recorded->second);
      }
    }
    return inner.Before(path, site, input_index, value);
  }
  const std::string key = Key(path, site.op, 'i', input_index);
  if (mode_ == Mode::kRecord) {
    if (input_index == 0 && NormWeightInput(site.op) >= 0) RecordNormInput(path, site, value);
    if (input_index == 0 && IsSoftmax(site.op)) pending_logits_ = LogitSumsOf(value);
    const int64_t bytes = value.numel() * 4;
    if (bytes_ + bytes > max_bytes_) {
      truncated_ = true;
    } else {
      bytes_ += bytes;
      tensors_[key] = value.detach().to(at::kFloat, /*non_blocking=*/false, /*copy=*/true);
    }
    return inner.Before(path, site, input_index, value);
  }
  const auto recorded = reference_->tensors_.find(key);
  if (recorded == reference_->tensors_.end() || !recorded->second.sizes().equals(value.sizes())) {
    return inner.Before(path, site, input_index, value);
  }
  const Maker* maker = makers_.Find(value);
  const c10::ScalarType* entered_as = island_entries_.Find(value);
  // A float32 value a run under a lower compute holds in float32 (made from float32
  // sources, or upcast), made in this forward outside any FP32 island: fed as the run made
  // it, so that an FP32 op amplifying a rounding made before it (a timestep rounded to
  // BF16, then `.float()` into a sinusoid) shows that error, judged against the error it
  // was fed.
  const bool carried = maker != nullptr && entered_as == nullptr && value.scalar_type() == at::kFloat &&
                       inner.HeldDtype(value) == at::kFloat && LowerCompute(policy_) &&
                       !InFp32Op(policy_, path, site.op);
  double input_error = 0;  // of a carried input, against the FP32 recording
  if (maker != nullptr && (maker->predicted > 0 || carried) && !ReadsOnlyTheShape(site.op)) {
    const at::Tensor ref = recorded->second.to(value.device(), at::kDouble);
    const double ref_norm = ref.norm().item<double>();
    const double error =
        ref_norm > 0 ? (value.detach().to(at::kDouble) - ref).norm().item<double>() / ref_norm : 0.0;
    if (carried && std::isfinite(error)) input_error = error;
    if (maker->predicted > 0) {
      const MadeInput input{error / maker->predicted, OpSite{path, site.op}, error, maker->site};
      const std::string& maker_op = maker->site.op;
      if (std::isfinite(error) && input.excess > worst_made_input_.excess) worst_made_input_ = input;
      if (std::isfinite(error) && (maker_op == "aten::add_" || maker_op == "aten::sub_") &&
          input.excess > worst_input_of_a_sum_in_place_.excess) {
        worst_input_of_a_sum_in_place_ = input;
      }
    }
  }
  const at::Tensor fed = carried ? value : Substitute(recorded->second, value, inner, entered_as);
  ErrorSums& sums = errors_[SiteKey(path, site.op, /*upcoming=*/true)];
  // A value an op made beyond what the dtype holds is fed to the next one non-finite: the
  // non-finite output that follows is its maker's (non-finite from finite inputs itself).
  if (maker != nullptr && fed.is_floating_point() && !at::isfinite(fed).all().item<bool>() &&
      at::isfinite(recorded->second).all().item<bool>()) {
    sums.fed_nonfinite = true;
  }
  const auto add_once = [](std::vector<OpSite>& sites, const OpSite& site) {
    if (std::find(sites.begin(), sites.end(), site) == sites.end()) sites.push_back(site);
  };
  if (maker != nullptr) {
    add_once(sums.input_makers, maker->site);
    if (!maker->relayed_sum.empty()) {  // the sum whose rounding a relay hands on
      add_once(sums.input_makers, maker->relayed_sum);
      for (const OpSite& relay : maker->relays) add_once(sums.relays, relay);
    }
  }
  sums.carried_error = std::max(sums.carried_error, input_error);
  sums.input_roundoff = std::max({sums.input_roundoff, input_error,
                                  UnitRoundoff(entered_as != nullptr ? *entered_as : inner.HeldDtype(fed))});
  return inner.Before(path, site, input_index, fed);
}

at::Tensor ModuleShadow::After(const std::string& path, const GraphSite& site, int output_index,
                               const at::Tensor& value) {
  GraphObserver& inner = inner_ != nullptr ? *inner_ : pass_through_;
  const at::Tensor out = inner.After(path, site, output_index, value);
  if (MakesUninitialised(site.op)) return out;
  if (steps_.count(step_) > 0 && Probed(out)) {
    if (site.kind == GraphSite::Kind::kOp) {
      double predicted = 0;
      if (measure_made_inputs_) {
        // An op in FP32 fed inputs rounded outside it makes that rounding: its prediction.
        // An op fed a stored weight (a blend's `1 - alpha` of a parameter) is predicted its
        // storage's rounding, as its isolated error is (Errors).
        const auto fed = errors_.find(SiteKey(path, site.op, /*upcoming=*/true));
        const bool weighted = site.weight_input >= 0 || StoredWeightInput(site.op) >= 0 ||
                              (fed != errors_.end() && fed->second.weighted);
        const double input_roundoff = fed != errors_.end() ? fed->second.input_roundoff : 0.0;
        predicted = std::max({PredictedError(policy_, path, site.op, weighted), input_roundoff,
                              AmplifiedRoundoff(SiteKey(path, site.op, /*upcoming=*/true), input_roundoff)});
        // Fed elements the shadow could not replace, its output carries their error.
        if (site.unhooked_list_input) predicted = 0;
      }
      const OpSite made{path, site.op};
      const bool carried = mode_ == Mode::kRecord && IsSum(site.op) && !sum_inputs_.origin.empty() &&
                           sum_inputs_.rms >= 0.5 * RootMeanSquare(out);
      Maker maker{made, predicted, carried ? sum_inputs_.origin : made, OpSite{}, {}};
      if (IsRelay(site.op) && relay_inputs_.floating == 1 && !relay_inputs_.scaled) {
        const Maker& source = relay_inputs_.source;
        maker.relayed_sum = !source.relayed_sum.empty()      ? source.relayed_sum
                            : SumsOrAverages(source.site.op) ? source.site
                                                             : OpSite{};
        if (!maker.relayed_sum.empty()) {
          maker.relays = source.relays;
          maker.relays.push_back(made);
        }
      }
      makers_.Put(out, maker);
      if (carried) {
        std::vector<OpSite>& sums = carriers_[SiteName(sum_inputs_.origin.module, sum_inputs_.origin.op)];
        if (std::find(sums.begin(), sums.end(), made) == sums.end()) sums.push_back(made);
      }
      if (IsSum(site.op)) sum_inputs_ = SumInputs{};
    }
    if (site.kind == GraphSite::Kind::kCopyingView && !copy_maker_.site.empty())
      makers_.Put(out, copy_maker_);
  } else if (steps_.count(step_) > 0 && site.kind == GraphSite::Kind::kOp && out.defined() &&
             at::isIntegralType(out.scalar_type(), /*includeBool=*/false)) {
    const OpSite made{path, site.op};  // an index: NoteChoice asks who made it
    makers_.Put(out, {made, 0, made, OpSite{}, {}});
  }
  if (site.kind != GraphSite::Kind::kOp || site.in_place || !Probed(out)) return out;
  const bool probed = steps_.count(step_) > 0;
  if (probed && output_index == 0) ++site_calls_[SiteName(path, site.op)];
  const std::string key = Key(path, site.op, 'o', output_index);
  if (mode_ == Mode::kRecord) {
    outputs_made_.insert(key);
    if (!probed) return out;
    // A softmax over its last dimension (its rows sum to 1) keeps its logits' sums.
    if (IsSoftmax(site.op) && output_index == 0 && pending_logits_.weights > 0 &&
        (out.detach().to(at::kDouble).sum(-1) - 1).abs().max().item<double>() < 1e-3) {
      LogitSums& sums = softmax_logits_[SiteKey(path, site.op, /*upcoming=*/false)];
      sums.amplified += pending_logits_.amplified;
      sums.weights += pending_logits_.weights;
      sums.squares += pending_logits_.squares;
      sums.deviations += pending_logits_.deviations;
    }
    pending_logits_ = LogitSums{};
    if (IsSumOrDifference(site.op) && output_index == 0 && pending_sum_.inputs > 0) {
      SumSquares& sums = sum_squares_[SiteKey(path, site.op, /*upcoming=*/false)];
      sums.inputs += pending_sum_.inputs * static_cast<double>(out.numel());
      sums.outputs += out.detach().to(at::kDouble).square().sum().item<double>();
      sums.fed_by_a_sum = sums.fed_by_a_sum || pending_sum_.fed_by_a_sum;
    }
    pending_sum_ = SumSquares{};
    const int64_t bytes = out.numel() * 4;
    if (bytes_ + bytes > max_bytes_) {
      truncated_ = true;
    } else {
      bytes_ += bytes;
      tensors_[key] = out.detach().to(at::kFloat, /*non_blocking=*/false, /*copy=*/true);
    }
    return out;
  }
  if (diverged_at_.empty() && reference_->outputs_made_.count(key) == 0 && site.op != "aten::to" &&
      site.op != "aten::type_as" && site.op != "aten::_to_copy") {
    diverged_at_ =
        path + " (" + site.op + ") " + (step_ < 0 ? "at the decode" : "at step " + std::to_string(step_));
  }
  if (!probed) return out;
  // An op fed list elements the shadow could not replace (GraphSite::unhooked_list_input)
  // returns the error they carry: not isolated, not measured.
  const auto recorded = reference_->tensors_.find(key);
  if (recorded != reference_->tensors_.end() && recorded->second.sizes().equals(out.sizes()) &&
      !site.unhooked_list_input) {
    Compare(path, site, recorded->second, out);
  }
  return out;
}

ModuleShadow::RoundedNorm ModuleShadow::RoundedCancellingNorm() const {
  RoundedNorm found;
  if (reference_ == nullptr) return found;
  // What the compute's precision predicts of the norm: a rounding it returns at twice
  // that or more is a cancellation.
  const double compute = UnitRoundoff(policy_.emulate_fp16 ? c10::kHalf : policy_.compute);
  const auto in_fp32 = [&](const OpSite& site) { return InFp32Op(policy_, site.module, site.op); };
  for (const auto& [key, input] : reference_->norm_inputs_) {
    if (input.offset < kCancellingOffset) continue;
    const OpSite& maker = input.maker;
    const double gain = input.offset / input.rms;  // what the norm returns of an absolute error
    // A maker in FP32 rounds nothing itself, but may be fed the offset rounded outside FP32
    // (`norm(h + 0.2 * conv(h))` with the add and the mul kept, the conv's bias making the
    // offset): the FP32 op fed that rounding is found up the chain of FP32 makers.
    OpSite fed_rounded;
    std::vector<OpSite> queue;  // candidates for rounded_by
    if (!maker.empty() && in_fp32(maker)) {
      fed_rounded = FedTheOffsetRounded(maker, gain, 2 * compute);
      if (fed_rounded.empty()) continue;
      AbsoluteError(fed_rounded, &queue);
    } else if (!maker.empty()) {
      queue.push_back(maker);
    }
    for (size_t i = 0; i < queue.size() && i < 8; ++i) {
      std::vector<OpSite> makers;
      const double returned = AbsoluteError(queue[i], &makers) * gain;
      if (in_fp32(queue[i])) {
        // An FP32 op hands on what was rounded before it (a relay kept with the norm and
        // its sum: `h + emb_proj(e).repeat_interleave(...)`): up its makers.
        for (const OpSite& m : makers) {
          if (std::find(queue.begin(), queue.end(), m) == queue.end()) queue.push_back(m);
        }
        continue;
      }
      // The maker itself is the one the offset is charged to, at any error.
      if (!(returned >= 2 * compute) && !(queue[i] == maker)) continue;
      IsolatedError rounder;
      rounder.module = queue[i].module;
      rounder.op = queue[i].op;
      rounder.error = returned;
      rounder.predicted = compute;
      rounder.input_offset = input.offset;
      rounder.input_maker = queue[i];
      found.rounded_by.push_back(rounder);
      for (const OpSite& m : makers) {
        if (std::find(queue.begin(), queue.end(), m) == queue.end()) queue.push_back(m);
      }
    }
    const OpSite norm = SiteOfKey(key);
    char offset[32];
    std::snprintf(offset, sizeof offset, "%.0fx", input.offset);
    found.note = norm.module + " (" + norm.op + ") takes an input" +
                 (maker.empty() ? "" : " from " + maker.module + " (" + maker.op + ")") + " whose mean is " +
                 offset + " its spread, rounded outside FP32" +
                 (fed_rounded.empty() ? "" : " before " + fed_rounded.module + " (" + fed_rounded.op + ")") +
                 ": the norm returns that rounding at full scale";
    return found;
  }
  return found;
}

double ModuleShadow::AbsoluteError(const OpSite& site, std::vector<OpSite>* makers) const {
  double diff = 0;
  int64_t values = 0;
  for (const auto& [key, sums] : errors_) {
    if (!(SiteOfKey(key) == site)) continue;
    diff += sums.nonfinite > 0 ? std::numeric_limits<double>::infinity() : sums.diff;
    values += sums.values;
    makers->insert(makers->end(), sums.input_makers.begin(), sums.input_makers.end());
  }
  return values > 0 ? std::sqrt(diff / static_cast<double>(values)) : 0;
}

OpSite ModuleShadow::FedTheOffsetRounded(const OpSite& maker, double gain, double limit) const {
  std::vector<OpSite> queue = {maker};
  for (size_t i = 0; i < queue.size() && i < 8; ++i) {
    std::vector<OpSite> makers;
    if (AbsoluteError(queue[i], &makers) * gain >= limit) return queue[i];
    for (const OpSite& m : makers) {
      if (InFp32Op(policy_, m.module, m.op) && std::find(queue.begin(), queue.end(), m) == queue.end())
        queue.push_back(m);
    }
  }
  return OpSite{};
}

std::string ModuleShadow::SiteKey(const std::string& path, const std::string& op, bool upcoming) const {
  const std::string name = SiteName(path, op);
  const auto found = site_calls_.find(name);
  const int calls = found == site_calls_.end() ? 0 : found->second;
  return name + "\t" + std::to_string(upcoming ? calls : calls - 1);
}

void ModuleShadow::RecordNormInput(const std::string& path, const GraphSite& site, const at::Tensor& value) {
  const double offset = OffsetRatio(site.op, value);
  NormInput& input = norm_inputs_[SiteKey(path, site.op, /*upcoming=*/true)];
  if (offset <= input.offset) return;
  const Maker* maker = makers_.Find(value);
  input = NormInput{offset, maker != nullptr ? maker->site : OpSite{}, RootMeanSquare(value),
                    maker != nullptr ? maker->magnitude_origin : OpSite{}};
}

void ModuleShadow::NoteChoice(const std::string& path, const GraphSite& site, int input_index,
                              const at::Tensor& value) {
  const std::string key = Key(path, site.op, 'n', input_index);
  if (mode_ == Mode::kRecord) {
    const int64_t bytes = value.numel() * static_cast<int64_t>(value.element_size());
    if (bytes_ + bytes > max_bytes_) {
      truncated_ = true;
    } else {
      bytes_ += bytes;
      tensors_[key] = value.detach().clone();
    }
    return;
  }
  const auto recorded = reference_->tensors_.find(key);
  if (recorded == reference_->tensors_.end() || !recorded->second.sizes().equals(value.sizes())) return;
  if (at::equal(recorded->second.to(value.device(), value.scalar_type()), value.detach())) return;
  ErrorSums& sums = errors_[SiteKey(path, site.op, /*upcoming=*/true)];
  const Maker* maker = makers_.Find(value);
  if (maker == nullptr || !MakesAnIndexOfAFloat(maker->site.op)) {
    sums.chose_differently = true;
  } else {
    sums.index_maker = maker->site;  // a rounded index
  }
}

void ModuleShadow::Compare(const std::string& path, const GraphSite& site, const at::Tensor& recorded,
                           const at::Tensor& value) {
  const at::Tensor ref = recorded.to(value.device(), at::kDouble);
  const at::Tensor x = value.detach().to(at::kDouble);
  const at::Tensor ref_finite = at::isfinite(ref);
  const at::Tensor both = ref_finite.logical_and(at::isfinite(x));
  ErrorSums& sums = errors_[SiteKey(path, site.op, /*upcoming=*/false)];
  sums.weighted = sums.weighted || site.weight_input >= 0;
  if (!sums.fed_nonfinite) sums.nonfinite += ref_finite.logical_and(both.logical_not()).sum().item<int64_t>();
  sums.diff += at::where(both, (x - ref).square(), at::zeros_like(ref)).sum().item<double>();
  sums.ref += at::where(ref_finite, ref.square(), at::zeros_like(ref)).sum().item<double>();
  sums.values += ref.numel();
  ++sums.calls;
}

std::vector<IsolatedError> ModuleShadow::Errors() const {
  std::vector<IsolatedError> out;
  for (const auto& [name, sums] : errors_) {
    if (sums.calls == 0) continue;
    const OpSite site = SiteOfKey(name);
    IsolatedError e;
    e.module = site.module;
    e.op = site.op;
    e.calls = sums.calls;
    e.error = sums.nonfinite > 0 ? std::numeric_limits<double>::infinity()
              : sums.ref > 0     ? std::sqrt(sums.diff / sums.ref)
                                 : 0.0;
    e.saturated_weight = sums.saturated_weight;
    const auto norm = reference_->norm_inputs_.find(name);
    if (norm != reference_->norm_inputs_.end()) e.input_offset = norm->second.offset;
    e.input_makers = sums.input_makers;
    e.relays = sums.relays;
    e.carried_error = sums.carried_error;
    e.chose_differently = sums.chose_differently;
    e.index_maker = sums.index_maker;
    if (norm != reference_->norm_inputs_.end()) e.offset_origin = norm->second.origin;
    const auto carriers =
        e.input_offset >= kCancellingOffset && !e.offset_origin.empty()
            ? reference_->carriers_.find(SiteName(e.offset_origin.module, e.offset_origin.op))
            : reference_->carriers_.end();
    if (carriers != reference_->carriers_.end()) {
      e.offset_carriers = carriers->second;
      for (const auto& [key, input] : reference_->norm_inputs_) {
        const OpSite reader = SiteOfKey(key);
        if (input.offset >= kCancellingOffset && input.origin == e.offset_origin &&
            std::find(e.offset_readers.begin(), e.offset_readers.end(), reader) == e.offset_readers.end()) {
          e.offset_readers.push_back(reader);
        }
      }
    }
    e.input_maker = norm != reference_->norm_inputs_.end() ? norm->second.maker
                    : sums.input_makers.empty()            ? OpSite{}
                                                           : sums.input_makers.front();
    // A norm that cancels its input's offset returns the compute's rounding of that input
    // at offset x its precision: judged against the compute's precision, not against its
    // affine weights' storage (an FP8 format's 2^-2 would hide a 49x cancellation).
    const bool cancels = e.input_offset >= kCancellingOffset;
    e.predicted = std::max({PredictedError(policy_, e.module, e.op, sums.weighted && !cancels),
                            sums.input_roundoff, AmplifiedRoundoff(name, sums.input_roundoff)});
    out.push_back(e);
  }
  SortByExcess(out);
  return out;
}

ModuleShadow::ActiveScope::ActiveScope(ModuleShadow& shadow) : previous_(active_shadow) {
  active_shadow = &shadow;
}

ModuleShadow::ActiveScope::~ActiveScope() { active_shadow = previous_; }

ModuleShadow* ModuleShadow::Active() { return active_shadow; }

ModuleShadow::Suspend::Suspend() : previous_(active_shadow) { active_shadow = nullptr; }

ModuleShadow::Suspend::~Suspend() { active_shadow = previous_; }

GraphObserver& ShadowOrSelf(GraphObserver& inner, int step) {
  if (active_shadow == nullptr) return inner;
  active_shadow->Wrap(&inner, step);
  return *active_shadow;
}

}  // namespace framegate
