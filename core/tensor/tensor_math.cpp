#include "tensor/tensor_math.h"

#include <ATen/Functions.h>

#include <string>

#include "comm/failure.h"
#include "common/error.h"

namespace ddp::core {
namespace {

// "[2, 3]", as ScriptModule's messages print shapes.
std::string shape_of(const at::Tensor& t) { return c10::str(t.sizes()); }

// ATen's refusal (shapes that do not broadcast, a dtype an operator does
// not take) as the caller's mistake, naming the operator; an output that
// cannot be allocated as Status::NoMemory.
template <typename F>
at::Tensor checked(const std::string& what, F&& compute) {
  try {
    // Every handle the C API gives out is contiguous; broadcasting can
    // give an expanded view.
    return compute().contiguous();
  } catch (const c10::Error& e) {
    fail_from_aten(Status::InvalidArgument, what, e);
  }
}

}  // namespace

const char* op_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add: return "add";
    case BinaryOp::Sub: return "sub";
    case BinaryOp::Mul: return "mul";
    case BinaryOp::Div: return "div";
    case BinaryOp::Pow: return "pow";
    case BinaryOp::Maximum: return "maximum";
    case BinaryOp::Minimum: return "minimum";
  }
  return "?";
}

const char* op_name(UnaryOp op) {
  switch (op) {
    case UnaryOp::Neg: return "neg";
    case UnaryOp::Exp: return "exp";
    case UnaryOp::Log: return "log";
    case UnaryOp::Sqrt: return "sqrt";
    case UnaryOp::Abs: return "abs";
    case UnaryOp::Square: return "square";
    case UnaryOp::Relu: return "relu";
    case UnaryOp::Sigmoid: return "sigmoid";
    case UnaryOp::Tanh: return "tanh";
    case UnaryOp::Log1p: return "log1p";
    case UnaryOp::Sin: return "sin";
    case UnaryOp::Cos: return "cos";
  }
  return "?";
}

at::Tensor binary(BinaryOp op, const at::Tensor& a, const at::Tensor& b_in) {
  const at::Tensor b = b_in.device() == a.device() ? b_in : b_in.to(a.device());
  return checked(std::string("tensor ") + op_name(op) + " of shapes " + shape_of(a) + " and " + shape_of(b), [&] {
    switch (op) {
      case BinaryOp::Add: return at::add(a, b);
      case BinaryOp::Sub: return at::sub(a, b);
      case BinaryOp::Mul: return at::mul(a, b);
      case BinaryOp::Div: return at::div(a, b);
      case BinaryOp::Pow: return at::pow(a, b);
      case BinaryOp::Maximum: return at::maximum(a, b);
      case BinaryOp::Minimum: return at::minimum(a, b);
    }
    fail(Status::InvalidArgument, "tensor binary operator " + std::to_string(static_cast<int>(op)) + " is unknown");
  });
}

at::Tensor binary_scalar(BinaryOp op, const at::Tensor& a, double s) {
  return checked(std::string("tensor ") + op_name(op) + " by a scalar", [&] {
    switch (op) {
      case BinaryOp::Add: return at::add(a, s);
      case BinaryOp::Sub: return at::sub(a, s);
      case BinaryOp::Mul: return at::mul(a, s);
      case BinaryOp::Div: return at::div(a, s);
      case BinaryOp::Pow: return at::pow(a, s);
      // torch.clamp(a, min=s) is maximum with a scalar (its gradient too).
      case BinaryOp::Maximum: return at::clamp_min(a, s);
      case BinaryOp::Minimum: return at::clamp_max(a, s);
    }
    fail(Status::InvalidArgument, "tensor binary operator " + std::to_string(static_cast<int>(op)) + " is unknown");
  });
}

at::Tensor unary(UnaryOp op, const at::Tensor& a) {
  return checked(std::string("tensor ") + op_name(op), [&] {
    switch (op) {
      case UnaryOp::Neg: return at::neg(a);
      case UnaryOp::Exp: return at::exp(a);
      case UnaryOp::Log: return at::log(a);
      case UnaryOp::Sqrt: return at::sqrt(a);
      case UnaryOp::Abs: return at::abs(a);
      case UnaryOp::Square: return at::square(a);
      case UnaryOp::Relu: return at::relu(a);
      case UnaryOp::Sigmoid: return at::sigmoid(a);
      case UnaryOp::Tanh: return at::tanh(a);
      case UnaryOp::Log1p: return at::log1p(a);
      case UnaryOp::Sin: return at::sin(a);
      case UnaryOp::Cos: return at::cos(a);
    }
    fail(Status::InvalidArgument, "tensor unary operator " + std::to_string(static_cast<int>(op)) + " is unknown");
  });
}

at::Tensor softmax(const at::Tensor& a, int64_t dim, bool log) {
  check_arg(dim >= -a.dim() && dim < std::max<int64_t>(a.dim(), 1),
            std::string("tensor ") + (log ? "log_softmax" : "softmax") + ": dim " + std::to_string(dim) +
                " is outside a tensor of shape " + shape_of(a));
  return checked(log ? "tensor log_softmax" : "tensor softmax",
                 [&] { return log ? at::log_softmax(a, dim) : at::softmax(a, dim); });
}

at::Tensor reduce(ReductionOp op, const at::Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  const char* name = op == ReductionOp::Sum ? "sum" : "mean";
  for (int64_t d : dims)
    check_arg(d >= -a.dim() && d < std::max<int64_t>(a.dim(), 1),
              std::string("tensor ") + name + ": dim " + std::to_string(d) + " is outside a tensor of shape " +
                  shape_of(a));
  return checked(std::string("tensor ") + name, [&] {
    if (dims.empty() && !keepdim) return op == ReductionOp::Sum ? at::sum(a) : at::mean(a);
    at::IntArrayRef d(dims);
    return op == ReductionOp::Sum ? at::sum(a, d, keepdim) : at::mean(a, d, keepdim);
  });
}

double item(const at::Tensor& a) {
  check_arg(a.numel() == 1, "tensor item: the tensor has " + std::to_string(a.numel()) + " elements, not one");
  return a.item<double>();
}

}  // namespace ddp::core
