#include "model/losses.h"

#include <ATen/Functions.h>
#include <ATen/core/Reduction.h>

#include <string>

#include "comm/failure.h"
#include "common/error.h"

namespace ddp::core {
namespace {

using Kind = LossSpec::Kind;
using Reduction = LossSpec::Reduction;

// "[2, 3]", as ScriptModule's messages print shapes.
std::string shape_of(const at::Tensor& t) { return c10::str(t.sizes()); }

int64_t aten_reduction(Reduction r) {
  switch (r) {
    case Reduction::Mean: return at::Reduction::Mean;
    case Reduction::Sum:
    case Reduction::BatchMean: return at::Reduction::Sum;
    case Reduction::None: return at::Reduction::None;
  }
  return at::Reduction::Mean;
}

at::Tensor on(const at::Tensor& t, const at::Tensor& like) {
  return !t.defined() || t.device() == like.device() ? t : t.to(like.device());
}

void check_same_shape(const std::string& name, const at::Tensor& x, const at::Tensor& y) {
  check_arg(x.sizes() == y.sizes(),
            name + ": input " + shape_of(x) + " and target " + shape_of(y) + " differ in shape");
}

void check_class_weight(const std::string& name, const at::Tensor& w, const at::Tensor& x) {
  if (!w.defined()) return;
  const int64_t classes = x.dim() >= 2 ? x.size(1) : x.size(0);
  check_arg(w.dim() == 1 && w.size(0) == classes,
            name + ": weight " + shape_of(w) + " must have one entry per class (" + std::to_string(classes) + ")");
}

// Class-index targets: one int64 per row (and per position after the
// class dimension).
void check_index_target(const std::string& name, const at::Tensor& x, const at::Tensor& y) {
  check_arg(x.dim() >= 1, name + ": input must have a class dimension");
  check_arg(y.scalar_type() == at::kLong, name + ": target must be one int64 class index per row (or a float class "
                                                 "probability per class), not " +
                                                 std::string(c10::toString(y.scalar_type())));
  std::vector<int64_t> want(x.sizes().begin(), x.sizes().end());
  if (x.dim() >= 2) want.erase(want.begin() + 1); else want.clear();
  check_arg(y.sizes() == at::IntArrayRef(want),
            name + ": target " + shape_of(y) + " does not fit input " + shape_of(x) +
                " (one class index per row, without the class dimension)");
}

at::Tensor compute(const LossSpec& s, const std::string& name, const at::Tensor& x, const at::Tensor& y) {
  const int64_t red = aten_reduction(s.reduction);
  switch (s.kind) {
    case Kind::Mse:
      check_same_shape(name, x, y);
      return at::mse_loss(x, y, red);
    case Kind::L1:
      check_same_shape(name, x, y);
      return at::l1_loss(x, y, red);
    case Kind::SmoothL1:
      check_same_shape(name, x, y);
      check_arg(s.beta >= 0, name + ": beta " + std::to_string(s.beta) + " is not a number >= 0");
      return at::smooth_l1_loss(x, y, red, s.beta);
    case Kind::Huber:
      check_same_shape(name, x, y);
      check_arg(s.delta > 0, name + ": delta " + std::to_string(s.delta) + " must be positive");
      return at::huber_loss(x, y, red, s.delta);
    case Kind::BceWithLogits:
      check_same_shape(name, x, y);
      if (s.pos_weight.defined())
        check_arg(s.pos_weight.dim() <= 1 && (s.pos_weight.numel() == 1 || (x.dim() >= 1 && s.pos_weight.numel() == x.size(-1))),
                  name + ": pos_weight " + shape_of(s.pos_weight) + " must have one entry per class (the last dimension of " +
                      shape_of(x) + ")");
      return at::binary_cross_entropy_with_logits(x, y, on(s.weight, x), on(s.pos_weight, x), red);
    case Kind::CrossEntropy:
      check_arg(s.label_smoothing >= 0 && s.label_smoothing <= 1,
                name + ": label_smoothing " + std::to_string(s.label_smoothing) + " is outside [0, 1]");
      check_class_weight(name, s.weight, x);
      // Class probabilities (a float target of the input's shape) or class indices.
      if (at::isFloatingType(y.scalar_type())) check_same_shape(name, x, y);
      else check_index_target(name, x, y);
      return at::cross_entropy_loss(x, y, on(s.weight, x), red, s.ignore_index, s.label_smoothing);
    case Kind::Nll:
      check_class_weight(name, s.weight, x);
      check_index_target(name, x, y);
      return at::nll_loss_nd(x, y, on(s.weight, x), red, s.ignore_index);
    case Kind::KlDiv: {
      check_same_shape(name, x, y);
      at::Tensor l = at::kl_div(x, y, red, s.log_target);
      // F.kl_div's 'batchmean': the sum over the batch's first dimension's size.
      if (s.reduction == Reduction::BatchMean && x.dim() > 0) l = l / x.size(0);
      return l;
    }
  }
  fail(Status::InvalidArgument, "loss kind " + std::to_string(static_cast<int>(s.kind)) + " is unknown");
}

}  // namespace

const char* loss_name(Kind kind) {
  switch (kind) {
    case Kind::Mse: return "mse_loss";
    case Kind::CrossEntropy: return "cross_entropy";
    case Kind::BceWithLogits: return "binary_cross_entropy_with_logits";
    case Kind::L1: return "l1_loss";
    case Kind::SmoothL1: return "smooth_l1_loss";
    case Kind::Huber: return "huber_loss";
    case Kind::Nll: return "nll_loss";
    case Kind::KlDiv: return "kl_div";
  }
  return "loss";
}

at::Tensor compute_loss(const LossSpec& spec, const at::Tensor& input, const at::Tensor& target_in) {
  const std::string name = loss_name(spec.kind);
  check_arg(input.defined() && target_in.defined(), name + ": input or target is undefined");
  check_arg(spec.reduction != Reduction::BatchMean || spec.kind == Kind::KlDiv,
            name + ": reduction 'batchmean' is kl_div's only");
  check_arg(at::isFloatingType(input.scalar_type()),
            name + ": input must be floating point, not " + std::string(c10::toString(input.scalar_type())));
  const at::Tensor target = on(target_in, input);
  try {
    return compute(spec, name, input, target).contiguous();
  } catch (const c10::Error& e) {
    fail_from_aten(Status::InvalidArgument, name, e);
  }
}

}  // namespace ddp::core
