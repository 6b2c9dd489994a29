// The elementwise family: broadcasting binary and unary ops, casts, Where, the GLUs and
// tl.Elementwise's generated kernels. One kernel per op and dtype, named after them
// (kernels/elementwise.cl: BINARY(add_##S, ...) makes add_f32, add_i64, ...): there are
// no variants to choose between.
#include <functional>

#include "runtime/lower/lower.h"

namespace tl {

void binary(const LowerNode& n, const std::string& op, const std::string& a, const std::string& b, const std::string& dst) {
  Dims o = n.shape(dst);
  const int64_t c = elementCount(o);
  Dims sa = broadcastStrides(n.shape(a), o), sb = broadcastStrides(n.shape(b), o), so = contiguousStrides(o);
  collapse(o, {&sa, &sb, &so});
  // Only Pow's exponent may differ in type from the other operand (its kernels name both).
  std::string kernel = op + "_" + typeSuffix(n.dtype(a));
  if (n.dtype(b) != n.dtype(a)) {
    if (op != "pow")
      throw Error(std::string("inputs of two types (") + dtypeName(n.dtype(a)) + " and " + dtypeName(n.dtype(b)) + ")",
                  ExitCode::BadInput);
    kernel += std::string("_") + typeSuffix(n.dtype(b));
  }
  n.launch(kernel)
      .mem(a)
      .mem(b)
      .mem(dst)
      .i32(c)
      .vec(pad8(o, 1))
      .vec(pad8(sa, 0))
      .vec(pad8(sb, 0))
      .run1d(c);
}

namespace {

void binaryOp(const LowerNode& n) {
  if (n.proto.input_size() != 2) throw Error("only two inputs are supported", ExitCode::BadInput);
  std::string op = lowerCase(n.proto.op_type());
  if (op == "mod" && n.attrInt("fmod", 0)) throw Error("Mod with fmod=1 has no kernel", ExitCode::BadInput);
  binary(n, op, n.in(0), n.in(1), n.out(0));
}

// Clip (opset 11 on: min and max as optional inputs): Max with min, then Min with max, the
// second in place over the first's output; neither bound: a copy through Max with itself.
void clipOp(const LowerNode& n) {
  if (n.attr("min") || n.attr("max")) throw Error("Clip with min and max as attributes (before opset 11) has no kernel", ExitCode::BadInput);
  const std::string x = n.in(0), y = n.out(0);
  const bool lo = n.hasIn(1), hi = n.hasIn(2);
  if (lo || !hi) binary(n, "max", x, lo ? n.in(1) : x, y);
  if (hi) binary(n, "min", lo ? y : x, n.in(2), y);
}

void unary(const LowerNode& n, const std::string& op) {
  int64_t c = elementCount(n.shape(n.out(0)));
  n.launch(op + "_" + typeSuffix(n.dtype(n.in(0)))).mem(n.in(0)).mem(n.out(0)).i32(c).run1d(c);
}

// Dropout runs as a view unless it has a mask output or a training_mode input (op
// table): then it copies where training_mode is a constant false, and is refused where
// it trains, since ONNX leaves its random stream to each runtime (no reference to meet).
void dropoutOp(const LowerNode& n) {
  if (n.hasOut(1)) throw Error("Dropout's mask output has no kernel", ExitCode::BadInput);
  const auto& mode = n.ex.analysis().at(n.in(2)).value;
  const bool inference = mode && [&] {
    for (int64_t v : n.ex.value(n.in(2)))
      if (v) return false;
    return true;
  }();
  if (!inference) throw Error("Dropout in training mode has no kernel (its output is random)", ExitCode::BadInput);
  const Dims& dims = n.shape(n.out(0));
  copyRegion(n, n.in(0), n.out(0), dims, 0, contiguousStrides(dims), 0, contiguousStrides(dims));
}

void unaryOp(const LowerNode& n) {
  std::string op = lowerCase(n.proto.op_type());
  if (op == "dropout") return dropoutOp(n);
  if (op == "gelu" && n.attrString("approximate", "none") == "tanh") op = "gelutanh";
  if (op == "isinf" && (!n.attrInt("detect_positive", 1) || !n.attrInt("detect_negative", 1)))
    throw Error("IsInf detecting one sign only has no kernel", ExitCode::BadInput);
  unary(n, op);
}

void castOp(const LowerNode& n) {
  DType from = n.dtype(n.in(0)), to = n.dtype(n.out(0));
  int64_t c = elementCount(n.shape(n.out(0)));
  n.launch(std::string("cast_") + typeSuffix(from) + "_" + typeSuffix(to)).mem(n.in(0)).mem(n.out(0)).i32(c).run1d(c);
}

void whereOp(const LowerNode& n) {
  Dims o = n.shape(n.out(0));
  const int64_t c = elementCount(o);
  Dims sc = broadcastStrides(n.shape(n.in(0)), o), sx = broadcastStrides(n.shape(n.in(1)), o),
       sy = broadcastStrides(n.shape(n.in(2)), o), so = contiguousStrides(o);
  collapse(o, {&sc, &sx, &sy, &so});
  n.launch(std::string("where_") + typeSuffix(n.dtype(n.in(1))))
      .mem(n.in(0))
      .mem(n.in(1))
      .mem(n.in(2))
      .mem(n.out(0))
      .i32(c)
      .vec(pad8(o, 1))
      .vec(pad8(sc, 0))
      .vec(pad8(sx, 0))
      .vec(pad8(sy, 0))
      .run1d(c);
}

}  // namespace

void glu(const LowerNode& n, const std::string& g, const std::string& u, const std::string& out, int64_t count, int kind) {
  n.launch("glu_f32").mem(g).mem(u).mem(out).i32(count).i32(kind).run1d(count);
}

namespace {

// tl.SwiGLU (docs/ops.md): silu(g) * u, elementwise over one shape.
void swigluOp(const LowerNode& n) {
  requireFloatInputs(n);
  glu(n, n.in(0), n.in(1), n.out(0), elementCount(n.shape(n.out(0))), 1);
}

// tl.GeGLU (docs/ops.md): gelu(g) * u, elementwise over one shape.
void gegluOp(const LowerNode& n) {
  requireFloatInputs(n);
  glu(n, n.in(0), n.in(1), n.out(0), elementCount(n.shape(n.out(0))), n.attrString("approximate", "none") == "tanh" ? 3 : 2);
}

// tl.Elementwise's program as the OpenCL kernel `name` of `inputs` inputs: out[i] = the
// last temporary, each input read through broadcast strides. Throws for a program it
// cannot read.
std::string elementwiseSource(const std::string& name, const std::string& program, size_t inputs) {
  static const std::map<std::string, std::pair<const char*, const char*>> ops = {
      {"add", {"(", " + "}}, {"sub", {"(", " - "}}, {"mul", {"(", " * "}}, {"div", {"(", " / "}},
      {"neg", {"(-", ""}}, {"sqrt", {"sqrt(", ""}}, {"recip", {"(1.0f / ", ""}}, {"exp", {"exp(", ""}},
      {"log", {"log(", ""}}, {"tanh", {"tanh(", ""}}, {"erf", {"erf(", ""}}, {"sigmoid", {"(1.0f / (1.0f + exp(-", ""}},
      {"relu", {"fmax(0.0f, ", ""}}, {"abs", {"fabs(", ""}}, {"sin", {"sin(", ""}}, {"cos", {"cos(", ""}}};
  std::string body, last;
  for (size_t pos = 0; pos < program.size();) {  // "tK=op(a,b);..."
    const size_t end = std::min(program.find(';', pos), program.size());
    const std::string step = program.substr(pos, end - pos);
    pos = end + 1;
    const size_t eq = step.find('='), open = step.find('('), close = step.rfind(')');
    if (eq == std::string::npos || open == std::string::npos || close == std::string::npos)
      throw Error("tl.Elementwise: bad program step '" + step + "'", ExitCode::BadInput);
    const std::string out = step.substr(0, eq), op = step.substr(eq + 1, open - eq - 1);
    const auto it = ops.find(op);
    if (it == ops.end()) throw Error("tl.Elementwise: unknown op '" + op + "'", ExitCode::BadInput);
    std::vector<std::string> args;
    for (size_t a = open + 1; a <= close;) {
      const size_t comma = std::min(step.find(',', a), close);
      std::string arg = step.substr(a, comma - a);
      if (!arg.empty() && (std::isdigit(static_cast<unsigned char>(arg[0])) || arg[0] == '-' || arg[0] == '.'))
        arg = "(float)(" + arg + ")";  // a literal
      args.push_back(arg);
      a = comma + 1;
    }
    const bool binary = std::string(it->second.second).size() > 0;
    if (args.size() != (binary ? 2u : 1u)) throw Error("tl.Elementwise: '" + op + "' with " + std::to_string(args.size()) + " operands", ExitCode::BadInput);
    std::string expr = it->second.first + args[0] + (binary ? it->second.second + args[1] : "") + ")";
    if (op == "sigmoid") expr += "))";
    body += "  const float " + out + " = " + expr + ";\n";
    last = out;
  }
  if (last.empty()) throw Error("tl.Elementwise: empty program", ExitCode::BadInput);
  std::string source = "__kernel void " + name + "(__global float* out, int n, int8 dims";
  std::string loads;
  for (size_t i = 0; i < inputs; ++i) {
    const std::string x = "x" + std::to_string(i);
    source += ", __global const float* " + x + "p, int8 s" + std::to_string(i);
    loads += "  const float " + x + " = " + x + "p[strided_offset(i, dims, s" + std::to_string(i) + ")];\n";
  }
  return source + ") {\n  const int i = get_global_id(0);\n  if (i >= n) return;\n" + loads + body + "  out[i] = " + last +
         ";\n}\n";
}

// tl.Elementwise (docs/ops.md): its program as one generated kernel, one per program and
// arity (named by a hash of both), generated and built on its first launch only.
void elementwiseOp(const LowerNode& n) {
  requireFloatInputs(n);
  const std::string program = n.attrString("program", "");
  const size_t inputs = static_cast<size_t>(n.proto.input_size());
  const std::string name = "ew_" + std::to_string(std::hash<std::string>{}(program + "/" + std::to_string(inputs)));
  cl_kernel kernel = n.ex.kernels().generated(name, [&] { return elementwiseSource(name, program, inputs); });
  Dims o = n.shape(n.out(0));
  const int64_t count = elementCount(o);
  std::vector<Dims> strides;
  for (size_t i = 0; i < inputs; ++i) strides.push_back(broadcastStrides(n.shape(n.in(i)), o));
  Dims so = contiguousStrides(o);
  std::vector<Dims*> all = {&so};
  for (auto& st : strides) all.push_back(&st);
  collapse(o, all);
  Launch l(n.ex, n.index, name, kernel, "tl.Elementwise's program, generated");
  l.mem(n.out(0)).i32(count).vec(pad8(o, 1));
  for (size_t i = 0; i < inputs; ++i) l.mem(n.in(i)).vec(pad8(strides[i], 0));
  l.run1d(count);
}

}  // namespace

const Lowerings& elementwiseLowerings() {
  static const Lowerings table = [] {
    Lowerings t;
    for (const char* op : {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Mod", "Equal", "Less", "LessOrEqual",
                           "Greater", "GreaterOrEqual", "And", "Or", "Xor"})
      t[op] = binaryOp;
    for (const char* op : {"Dropout", "Neg", "Abs", "Sqrt", "Reciprocal", "Exp", "Log", "Sin", "Cos", "Tanh", "Erf",
                           "Sigmoid", "Relu", "Floor", "Ceil", "Softplus", "Not", "Gelu", "IsNaN", "IsInf", "tl.Gelu"})
      t[op] = unaryOp;  // tl.Gelu: ONNX Gelu's kernels
    t["Cast"] = castOp;
    t["Clip"] = clipOp;
    t["Where"] = whereOp;
    t["tl.SwiGLU"] = swigluOp;
    t["tl.GeGLU"] = gegluOp;
    t["tl.Elementwise"] = elementwiseOp;
    return t;
  }();
  return table;
}

}  // namespace tl
