// ModuleShadow: where a finite error is MADE in a model package, not where it shows
// (torch.ao.ns's shadow mode, per op). Two runs of the same cell:
//   1. kRecord, under FP32: at the probed steps, every observed op's activation inputs
//      and its outputs are kept (float32 copies), keyed by (step, module path, op, input
//      or output index, occurrence in that step);
//   2. kCompare, under the policy: at the probed steps, each op's activation inputs are
//      replaced by the recorded FP32 ones (in the dtype the policy run holds them: cast
//      to it, or rounded through float16 where FP16 emulation would hold the value in
//      FP16: GraphObserver::HeldDtype), and its output is compared with the recorded FP32 output. That is
//      the op's isolated error: what the op makes from exact inputs, not what it carries.
//      Except a float32 value the policy run holds in float32 (made from float32 sources,
//      or upcast with `.float()`) and made in the same forward outside any FP32 island: it
//      is fed as the run made it, and the op is predicted the error it was fed (its
//      carried_error). An FP32 sinusoid of a timestep rounded to BF16 before it shows what
//      it makes of that rounding; an op that only carries it shows 1x.
// An op inside a module kept in FP32 (an island) whose input entered that module as a
// float32 copy of a value the run holds rounded (bf16, or float16 under FP16 emulation) is
// fed the FP32 recording rounded alike, and predicted that rounding: the island takes the
// rounding (and whatever was done to the value before) with it. The copy keeps its
// value's maker for the made-input check.
// Weights are not replaced (the weight operand of a weighted op, and a leaf that requires
// grad: a parameter), so a weight storage error belongs to the op that uses it. Other
// parameter operands (a bias, a norm's affine) of a package saved without requires_grad
// are replaced by their FP32 value in the policy's dtype: the same value, except that
// their FP8 rounding is not seen.
// Ops that write in place or return views have no hook (graph_instrumentation.h): their
// error shows in the next observed op that consumes them. An op fed a tensor list the
// graph builds otherwise than by prim::ListConstruct (`torch.cat(pads + [x])`) cannot be
// fed the recorded elements: it is not measured, and what it hands on is not checked.
//
// Each site (the k-th call of an op at a module path in a forward: the two adds of one
// module's forward are two sites, the same add at every probed step one) gets its
// relative L2 error over the probed calls, against
// what its compute dtype predicts (the unit roundoff: fp32 2^-24, bf16 2^-8, fp16 2^-11;
// a weighted op under FP8 storage: e4m3 2^-3, e5m2 2^-2); the producer is the site with
// the largest excess (error / predicted), a non-finite output from finite FP32 inputs
// being an infinite excess, and so is a weighted op whose FP32 weights exceed the largest
// value its FP8 storage holds (they saturate: kRecord keeps each weight's largest |w|).
//
// A softmax fed logits of magnitude s returns their rounding amplified: a logit rounded
// by u moves the probabilities by p (s u - sum p s u), so its error is its input's
// roundoff times the logits' magnitude (SoftmaxAmplification), a property of the model's
// attention, not a rounding the op makes: kRecord keeps each softmax site's logits' sums,
// and the site is predicted its input's roundoff times that amplification. Except logits
// whose offset the softmax cancels (their root mean square kCancellingOffset times their
// spread or more: keys with a bias of 300): like a norm's, that rounding is the op's error.
//
// An elementwise sum (add, sub, rsub) returns its inputs' rounding relative to its output:
// when it cancels them, amplified by k = |inputs| / |output| (root sums of squares, each
// input broadcast to the output's shape; `1 - alpha` of a sigmoid's 0.75: 3x), a property
// of the model's values as a softmax's logits are. kRecord keeps each sum site's squares,
// and the site is predicted its input's roundoff times sqrt(1 + k^2) (the inputs' rounding
// amplified, and its own). Except a sum fed by a sum or a mean, or by a relay of one (an
// offset added, then taken away: `(z + 64) - 64`, `(z + 64) * 1.0 - 64`, `x - x.mean()`),
// or one that cancels kCancellingOffset times its output or more and so much that no bit
// of its output is left (kLostOutput: a blend weight of 0.9995 that BF16 stores as 1.0):
// that cancellation is the op's error. A healthy blend at alpha 0.9 (k = 9) keeps 5 of
// BF16's 8 bits: predicted.
//
// A norm (norm_ops.h) cancels its input's mean: when that mean stands far from the
// input's spread, the rounding of it (the input's error, within its precision) comes back
// at full scale in the norm's output, and the norm's isolated error is made by the op that
// added the offset. kRecord keeps, for each norm site, its FP32 input's offset ratio
// (root mean square over standard deviation, pooled over the rows the norm normalises:
// per sample, or per last-dimension row for layer_norm; 1 for a centred input) and the op
// that made that input (the last observed op that wrote its storage in the same forward).
//
// A model installs the active shadow around its own observer (ShadowOrSelf) at each
// forward; the shadow is active on its thread while a ModuleShadow::ActiveScope lives.
// Not thread-safe; one per run.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <unordered_set>
#include <vector>

#include "pipelines/dtype_policy.h"
#include "pipelines/graph_instrumentation.h"
#include "pipelines/storage_map.h"

namespace framegate {

// An op at a module's own level: module "denoiser.mix", op "aten::sub"; empty when none.
struct OpSite {
  std::string module;
  std::string op;
  bool empty() const { return op.empty(); }
  bool operator==(const OpSite& other) const { return module == other.module && op == other.op; }
};

// One site's isolated error over the probed calls.
struct IsolatedError {
  std::string module;    // "denoiser.blocks.1.ff.0"
  std::string op;        // "aten::linear"
  double error = 0;      // relative L2 against the FP32 output; +inf: non-finite from finite
  double predicted = 0;  // what the site's compute dtype, and the dtype its inputs come in, predict
  int64_t calls = 0;
  // The largest FP32 weight of the op when it is beyond what the policy's weight storage
  // holds (FP8: 448 e4m3, 57344 e5m2): the weights saturate, an error no rounding
  // predicts; 0 when none is.
  double saturated_weight = 0;
  // A norm site: its FP32 input's offset ratio (rms / std, largest over the probed calls)
  // and the op that made that input ("decoder.out_mix", "aten::add"; empty when not
  // observed). Other sites: offset 0, and the op that made their first input made by an
  // op, in the run under the policy (empty when none).
  double input_offset = 0;
  OpSite input_maker;
  // A norm site: the op that made its input's offset. From input_maker up the sums (add,
  // sub) whose largest input carried their magnitude (a residual stream's adds carry a
  // patch embedding's +1024 to every block's norms); input_maker itself when it made it.
  OpSite offset_origin;
  // When sums carried offset_origin's magnitude on (a residual stream): every such sum,
  // and every norm site whose input took an offset from it (this one included).
  std::vector<OpSite> offset_carriers, offset_readers;
  // Every op that made one of its inputs in the run under the policy, in the order first
  // seen (kCompare).
  std::vector<OpSite> input_makers;
  // The largest error of an input fed as the run made it: a float32 value made in FP32
  // from a rounding before it (the op computes in FP32 already; the error comes with the
  // input, so only the module that made the rounding can keep it). 0 when none.
  double carried_error = 0;
  // Whether an integer or bool input (an index, a mask) differed from the FP32 run's at a
  // probed call: the op took other elements, so its error is a different choice (token
  // merging's near-tied similarities ranked otherwise), not a rounding of its own.
  bool chose_differently = false;
  // The op that rounded a float into an index that differed from the FP32 run's
  // (`t.to(dtype).long()`, `torch.bucketize(t.to(dtype), bounds)`): the error is the
  // rounding's, made there, not a choice (empty when none).
  OpSite index_maker;
  // The relays between a sum or a mean among input_makers and this op: ops of one float
  // input that hand its value on (`(h + 64) * 1.0`, a negation, a cast), whose rounding
  // the sum made; the sum is among input_makers (kCompare).
  std::vector<OpSite> relays;
  // error / predicted; +inf when the output was non-finite or the weights saturate
  double Excess() const;
};

// `errors`, largest excess first (ties keep their order).
void SortByExcess(std::vector<IsolatedError>& errors);

// A norm whose input's offset ratio is at least this has lost 3 bits of its input's
// precision to cancellation: its error is charged to the op that made the offset.
constexpr double kCancellingOffset = 8;

// An elementwise sum that cancels its inputs k times its output, not fed by a sum (a
// blend's `1 - alpha`), returns their rounding amplified k times: a property of the
// model's values, as long as some bits of its output are left. At k * roundoff of this
// or more none is (a blend weight of 0.9995 that BF16 stores as 1.0): the op's error.
constexpr double kLostOutput = 0.5;

// How many times a relative rounding of softmax logits `logits` (over the last dimension)
// shows in the probabilities' relative L2 error: sqrt(sum_rows (sum_i p_i^2 s_i^2 (1 - 2 p_i)
// + sum_i p_i^2 sum_j p_j^2 s_j^2) / sum_rows sum_i p_i^2), the expected error of
// independent roundings over theirs. 0 for logits whose offset the softmax cancels (root
// mean square kCancellingOffset times their standard deviation over each row, or more).
double SoftmaxAmplification(const at::Tensor& logits);

// The relative error the policy's rounding predicts for op `op` at `path` (`weighted`:
// the op has a weight operand; its storage's error counts where the policy stores it so).
double PredictedError(const DtypePolicy& policy, const std::string& path, const std::string& op,
                      bool weighted);

class ModuleShadow : public GraphObserver {
 public:
  enum class Mode { kRecord, kCompare };
  // A softmax's logits, pooled over its calls (SoftmaxAmplification's terms): the
  // amplified squares, the probabilities' squares, the logits' squares, and their squared
  // deviations from each row's mean.
  struct LogitSums {
    double amplified = 0, weights = 0, squares = 0, deviations = 0;
  };
  // `steps`: the sampler steps probed (-1: the decode). kCompare needs the kRecord shadow
  // of the same cell under FP32 (`reference`, which must outlive this one) and the policy.
  // At most `max_bytes` of FP32 tensors are kept; past that, later calls are not
  // recorded (and not replaced): truncated() says so.
  ModuleShadow(Mode mode, std::set<int> steps, DtypePolicy policy, const ModuleShadow* reference = nullptr,
               int64_t max_bytes = int64_t{1} << 30);

  // Called by the model at each forward: the observer the shadow wraps and the step.
  void Wrap(GraphObserver* inner, int step);

  at::Tensor Before(const std::string& path, const GraphSite& site, int input_index,
                    const at::Tensor& value) override;
  at::Tensor After(const std::string& path, const GraphSite& site, int output_index,
                   const at::Tensor& value) override;
  // The wrapped observer's: a branch on a dtype goes where it goes without the shadow.
  c10::ScalarType HeldDtype(const at::Tensor& value) const override {
    return inner_ != nullptr ? inner_->HeldDtype(value) : value.scalar_type();
  }

  // kCompare: every site measured, largest excess first.
  std::vector<IsolatedError> Errors() const;
  bool truncated() const { return truncated_; }
  // kCompare: the first op output (not a dtype conversion) of the run under the policy that
  // the FP32 run did not make, "denoiser.branch_a (aten::linear) at step 3": the runs took
  // different paths there (a branch on a value, or on the dtype); "" when they did not.
  const std::string& diverged_at() const { return diverged_at_; }
  // kCompare: the first probed norm whose FP32 input has a cancelling offset
  // (kCancellingOffset) made by an op the policy does not compute in FP32, or by one in
  // FP32 fed that offset rounded (its error times the offset at least twice the compute's
  // unit roundoff), in words ("denoiser.norm (aten::group_norm) takes ..."); "" when none.
  // Such a norm returns its
  // input's rounding at full scale even when its own error, measured on the exact input
  // (an FP32 island entered by a cast), is none.
  struct RoundedNorm {
    std::string note;  // in words; "" when no norm returns a rounded offset
    // The ops outside FP32 that rounded the offset, nearest the norm first: the maker, or
    // the ones that made the inputs of the FP32 op fed the rounding; then up their makers
    // outside FP32 while each rounds at the offset's scale, and through the FP32 ops among
    // them (at most 8 sites): in `norm(h + 0.2 * conv(h))` with the add kept, the mul and
    // the conv whose bias makes the offset; with a relay kept too
    // (`h + proj(e).repeat_interleave(f)`), the linear behind it. Each as a cause: its
    // error what the norm returns of its rounding (relative), predicted the compute's unit
    // roundoff, and itself the offset's maker.
    std::vector<IsolatedError> rounded_by;
  };
  RoundedNorm RoundedCancellingNorm() const;
  // kCompare: of the op inputs that an op of the same forward made, the one whose relative
  // L2 error (against the FP32 run) is the most times what its maker's precision predicts:
  // that ratio, the site that took it (denoiser.mix, aten::conv3d) and its error. Each
  // op is fed its FP32 inputs, so such an input carries its maker's error, relative to the
  // part this op takes (a slice), plus what ops the shadow does not isolate (in place) did
  // to it since: at 2x or more, an error was made where no op's isolated error shows it.
  struct MadeInput {
    double excess = 0;
    OpSite site;
    double error = 0;
    OpSite maker;  // the op that last wrote it (decoder, aten::sub_)
  };
  const MadeInput& worst_made_input() const { return worst_made_input_; }
  // kCompare: the same, of the inputs last written by an add or subtract in place
  // (`z += 64; z -= 64`): such a sum that cancels its rounded input shows no isolated error
  // of its own, only in what it hands on.
  const MadeInput& worst_input_of_a_sum_in_place() const { return worst_input_of_a_sum_in_place_; }
  // kCompare, before the run: measure worst_made_input() (a norm per op input).
  void MeasureMadeInputs() { measure_made_inputs_ = true; }
  int64_t recorded_calls() const { return static_cast<int64_t>(tensors_.size()); }
  int64_t recorded_bytes() const { return bytes_; }

  // Makes `shadow` the active one on this thread until destroyed (scopes nest).
  class ActiveScope {
   public:
    explicit ActiveScope(ModuleShadow& shadow);
    ~ActiveScope();
    ActiveScope(const ActiveScope&) = delete;
    ActiveScope& operator=(const ActiveScope&) = delete;

   private:
    ModuleShadow* previous_;
  };
  static ModuleShadow* Active();
  // No shadow is active on this thread until destroyed (a model's own checks at load).
  class Suspend {
   public:
    Suspend();
    ~Suspend();
    Suspend(const Suspend&) = delete;
    Suspend& operator=(const Suspend&) = delete;

   private:
    ModuleShadow* previous_;
  };

 private:
  struct ErrorSums {
    double ref = 0, diff = 0;    // sums of ref^2 and (ref - x)^2 where ref is finite
    int64_t nonfinite = 0;       // values non-finite where ref is finite
    bool fed_nonfinite = false;  // an input its maker made beyond the dtype: nonfinite not counted
    int64_t calls = 0;
    int64_t values = 0;  // summed over the calls
    bool weighted = false;
    double saturated_weight = 0;  // IsolatedError::saturated_weight
    // The unit roundoff of the dtype its inputs were fed in: an op in FP32 (an island)
    // fed from outside its island takes them rounded to the policy's dtype.
    double input_roundoff = 0;
    double carried_error = 0;          // IsolatedError::carried_error
    bool chose_differently = false;    // IsolatedError::chose_differently
    OpSite index_maker;                // IsolatedError::index_maker
    std::vector<OpSite> input_makers;  // IsolatedError::input_makers (kCompare)
    std::vector<OpSite> relays;        // IsolatedError::relays (kCompare)
  };
  struct NormInput {  // kRecord: a norm site's input (IsolatedError::input_offset)
    double offset = 0;
    OpSite maker;
    double rms = 0;  // of that input
    OpSite origin;   // IsolatedError::offset_origin
  };
  std::string Key(const std::string& path, const std::string& op, char direction, int index);
  // kCompare: the first site, from `maker` up the chain of the FP32 ops that made its
  // inputs (breadth first, at most 8 sites), whose absolute error (root mean square over its
  // probed calls) times `gain` reaches `limit`; empty when none. A norm's input made by
  // an op in FP32 carries a rounding made outside FP32 when the FP32 op fed it reaches
  // the norm's offset / its input's rms as gain.
  OpSite FedTheOffsetRounded(const OpSite& maker, double gain, double limit) const;
  // kCompare: site's absolute error (root mean square over its probed calls; +inf when it
  // made a non-finite value) and, into `makers`, the ops that made its inputs.
  double AbsoluteError(const OpSite& site, std::vector<OpSite>* makers) const;
  // The site of the call of `op` at `path` that is under way ("path\top\tk": the k-th call
  // of that pair in this forward); `upcoming`: before its outputs (they count the call).
  std::string SiteKey(const std::string& path, const std::string& op, bool upcoming) const;
  // The recorded FP32 `recorded` in place of `value`, held as `inner` holds `value`, or
  // rounded to `entered_as` first when `value` entered an FP32 island held in that dtype.
  static at::Tensor Substitute(const at::Tensor& recorded, const at::Tensor& value, GraphObserver& inner,
                               const c10::ScalarType* entered_as);
  void RecordNormInput(const std::string& path, const GraphSite& site, const at::Tensor& value);
  // An op's integer or bool input at a probed step: kept (kRecord), or compared with the
  // FP32 run's (kCompare): one that differs is a different choice
  // (ErrorSums::chose_differently), unless a float rounded to it (`t.long()` of a rounded
  // timestep, or its bucket): then that cast or bucketize is the op's index_maker. Never
  // replaced.
  void NoteChoice(const std::string& path, const GraphSite& site, int input_index, const at::Tensor& value);
  void Compare(const std::string& path, const GraphSite& site, const at::Tensor& recorded,
               const at::Tensor& value);

  Mode mode_;
  std::set<int> steps_;
  DtypePolicy policy_;
  const ModuleShadow* reference_;
  int64_t max_bytes_;
  int64_t bytes_ = 0;
  bool truncated_ = false;
  GraphObserver* inner_ = nullptr;
  GraphObserver pass_through_;
  int step_ = 0;
  std::string diverged_at_;
  std::unordered_set<std::string> outputs_made_;     // kRecord: the key of every op output, every step
  std::map<std::string, int> occurrences_;           // key without occurrence -> calls seen
  std::map<std::string, at::Tensor> tensors_;        // key -> float32 copy (kRecord)
  std::map<std::string, int> site_calls_;            // "path\top" -> calls finished in this forward
  std::map<std::string, ErrorSums> errors_;          // SiteKey -> sums (kCompare)
  std::map<std::string, double> weight_absmax_;      // SiteKey/input -> largest |weight| (kRecord)
  std::map<std::string, NormInput> norm_inputs_;     // SiteKey -> its input (kRecord)
  std::map<std::string, LogitSums> softmax_logits_;  // SiteKey -> sums over its calls (kRecord)
  LogitSums pending_logits_;  // kRecord: the softmax under way's, until its output shows its dimension
  // An elementwise sum's squares, pooled over its calls (kRecord): its inputs' (each
  // broadcast to its output's shape) and its outputs', and whether an input was made by a
  // sum or a mean, or handed on from one by relays (Maker::relayed_sum).
  struct SumSquares {
    double inputs = 0, outputs = 0;
    bool fed_by_a_sum = false;
  };
  std::map<std::string, SumSquares> sum_squares_;  // SiteKey -> sums over its calls (kRecord)
  // kRecord: the sum under way's inputs: their mean squares added (`inputs`), until its
  // output shows their broadcast shape.
  SumSquares pending_sum_;
  // Its inputs' relative rounding `input_roundoff` as a site's compute amplifies it
  // (recorded by kRecord): times a softmax's SoftmaxAmplification, or an elementwise sum's
  // sqrt(1 + k^2) unless fed by a sum or a mean (or a relay of one), or k is kCancellingOffset
  // or more and k * input_roundoff reaches kLostOutput; 0 when not recorded.
  double AmplifiedRoundoff(const std::string& site_key, double input_roundoff) const;
  struct Maker {
    OpSite site;
    double predicted = 0;  // its PredictedError when made inputs are measured, else 0
    // Where its output's magnitude was made (kRecord): `site`, or for a sum whose largest
    // input holds at least half its output's root mean square, that input's origin.
    OpSite magnitude_origin;
    // A relay (IsolatedError::relays): the sum or mean whose value it hands on, through
    // the relays before it, and those relays, this one last; empty otherwise.
    OpSite relayed_sum;
    std::vector<OpSite> relays;
  };
  // The relay under way (Before its inputs, After its output, at a probed step): its float
  // tensor inputs and the maker of the last one, for its Maker::relayed_sum.
  struct RelayInputs {
    int floating = 0;
    bool scaled = false;  // also fed a scalar the model holds (a parameter, a computed one)
    Maker source;
  };
  RelayInputs relay_inputs_;
  // A sum's inputs seen so far (Before), for its output's Maker::magnitude_origin (After).
  struct SumInputs {
    double rms = 0;  // the largest input's
    OpSite origin;   // that input's magnitude origin
  };
  SumInputs sum_inputs_;
  // kRecord: a magnitude origin's SiteName -> the sums that carried it, in order.
  std::map<std::string, std::vector<OpSite>> carriers_;
  StorageMap<Maker> makers_;  // storage -> the op that last wrote it
  // kCompare: storage of a float32 copy an FP32 island was handed -> the dtype the run
  // held the value in outside it (bf16; float16 under FP16 emulation)
  StorageMap<c10::ScalarType> island_entries_;
  Maker copy_maker_;  // the maker of a copying view's input
  bool measure_made_inputs_ = false;
  MadeInput worst_made_input_;               // kCompare
  MadeInput worst_input_of_a_sum_in_place_;  // kCompare
};

// The active shadow on this thread wrapping `inner` at sampler step `step` (-1: decode),
// or `inner` itself when none is active. For models: the observer to activate.
GraphObserver& ShadowOrSelf(GraphObserver& inner, int step);

}  // namespace framegate
