// gelu: GELU as exporters write it, in its two forms:
//   tanh (gpt2's gelu_new, Gemma's gelu_pytorch_tanh): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))),
//     the cube as Pow(x, 3) or Mul(x, Mul(x, x))            =>  tl.Gelu(x), approximate = "tanh"
//   erf (ViT, BERT): 0.5 x (1 + erf(x / sqrt(2))), the division as Div(x, sqrt 2) or
//     Mul(x, 1/sqrt 2)                                       =>  tl.Gelu(x), approximate = "none"
// the 0.5 applied to x first or to the product last, any operand order.
#include <algorithm>
#include <cmath>

#include "fuse/fuse.h"
#include "fuse/pattern.h"
#include "graph/attributes.h"

namespace tl {
namespace {

bool near(std::optional<double> v, double want) { return v && std::fabs(*v - want) <= 1e-6 * std::fabs(want); }

// The other operand of a two-input Mul/Add whose one operand is a constant near `c`.
std::string byConstant(const PatternContext& ctx, const onnx::NodeProto& n, double c) {
  for (int i = 0; i < 2 && n.input_size() == 2; ++i)
    if (near(ctx.scalar(n.input(i)), c)) return n.input(1 - i);
  return "";
}

// The common tail: f = tanh(..) or erf(..) of x; 1 + f times x, halved (0.5 x (1 + f) in
// either order). `head` lists the nodes up to f's.
std::string finish(const PatternContext& c, const std::string& x, const std::string& f, std::vector<size_t> head,
                   const char* approximate, Rewrite& r) {
  size_t iOne, iMul, iHalf;
  const onnx::NodeProto* one = c.onlyReader(f, &iOne);
  if (!isOp(one, "Add") || !near(c.scalar(otherInput(*one, f)), 1.0)) return "it is not followed by + 1 alone";
  const onnx::NodeProto* mul = c.onlyReader(one->output(0), &iMul);
  if (!isOp(mul, "Mul")) return "1 + f is not multiplied alone";
  const std::string other = otherInput(*mul, one->output(0));
  const onnx::NodeProto* out = nullptr;
  head.insert(head.end(), {iOne, iMul});
  if (other == x) {  // x (1 + f), then * 0.5
    out = c.onlyReader(mul->output(0), &iHalf);
    if (!isOp(out, "Mul") || !near(c.scalar(otherInput(*out, mul->output(0))), 0.5))
      return "x (1 + f) is not halved alone";
    head.push_back(iHalf);
  } else {  // (0.5 x) (1 + f)
    const onnx::NodeProto* half = c.producer(other, "Mul", &iHalf);
    if (!half || byConstant(c, *half, 0.5) != x || !c.onlyReader(half->output(0)))
      return "1 + f is multiplied by neither x nor 0.5 x";
    out = mul;
    head.insert(head.begin(), iHalf);
  }
  if (c.analysis.at(x).dtype != DType::Float) return "x is not float32";
  std::sort(head.begin(), head.end());
  r.remove = head;
  r.fused = tlNode("Gelu", out->name(), {x}, out->output(0));
  addAttr(r.fused, "approximate", std::string(approximate));
  return "";
}

std::string match(const PatternContext& c, size_t tanh, Rewrite& r) {
  const auto& t = c.graph.node(tanh);
  size_t iScale, iAdd, iCoef, iCube;
  std::optional<size_t> iSq;  // the square, when the cube is Mul(x, Mul(x, x))
  const onnx::NodeProto* scale = c.producer(t.input(0), "Mul", &iScale);
  if (!scale || !c.onlyReader(scale->output(0))) return "its input is not a Mul read by it alone";
  const onnx::NodeProto* add = c.producer(byConstant(c, *scale, std::sqrt(2 / M_PI)), "Add", &iAdd);
  if (!add || !c.onlyReader(add->output(0))) return "its input is not sqrt(2/pi) times an Add read alone";
  // The Add is x + 0.044715 x^3: try each operand as x.
  std::string x;
  const onnx::NodeProto* coef = nullptr;
  for (int i = 0; i < 2 && !coef; ++i) {
    coef = c.producer(add->input(1 - i), "Mul", &iCoef);
    if (coef && !c.onlyReader(coef->output(0))) coef = nullptr;
    if (coef) x = add->input(i);
  }
  if (!coef) return "the Add has no Mul operand read by it alone";
  const std::string cubeName = byConstant(c, *coef, 0.044715);
  const onnx::NodeProto* cube = c.producer(cubeName, "Pow", &iCube);
  if (cube) {
    if (cube->input(0) != x || c.scalar(cube->input(1)) != 3.0) return "the cube is not Pow(x, 3)";
  } else {
    cube = c.producer(cubeName, "Mul", &iCube);
    size_t i = 0;
    const onnx::NodeProto* sq = cube ? c.producer(otherInput(*cube, x), "Mul", &i) : nullptr;
    if (!sq || sq->input(0) != x || sq->input(1) != x || !c.onlyReader(sq->output(0)))
      return "the cube is neither Pow(x, 3) nor Mul(x, Mul(x, x))";
    iSq = i;
  }
  if (!c.onlyReader(cube->output(0))) return "the cube has other readers";
  std::vector<size_t> head = {iCube, iCoef, iAdd, iScale, tanh};
  if (iSq) head.insert(head.begin(), *iSq);
  return finish(c, x, t.output(0), head, "tanh", r);
}

// Why the Erf at `erf` is not GELU's erf form (empty: it is, and `r` holds it).
std::string matchErf(const PatternContext& c, size_t erf, Rewrite& r) {
  const auto& e = c.graph.node(erf);
  const int p = c.graph.producer(e.input(0));
  if (p < 0 || !c.onlyReader(e.input(0))) return "its input is no node's output read by it alone";
  const auto& d = c.graph.node(static_cast<size_t>(p));
  std::string x;
  if (isOp(&d, "Div") && d.input_size() == 2 && near(c.scalar(d.input(1)), std::sqrt(2.0))) x = d.input(0);
  if (isOp(&d, "Mul")) x = byConstant(c, d, 1 / std::sqrt(2.0));
  if (x.empty()) return "its input is not x / sqrt(2)";
  return finish(c, x, e.output(0), {static_cast<size_t>(p), erf}, "none", r);
}
}  // namespace

PassResult fuseGelu(Model& model) {
  PassResult r = runPattern(model, "Tanh", match);
  absorb(r, runPattern(model, "Erf", matchErf));
  return r;
}

}  // namespace tl
