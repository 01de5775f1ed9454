//===- GradientCheckTest.cpp - finite-difference checks of every backward -===//
//
// For every op px-autodiff differentiates, on random f64 inputs:
//
//   analytic  the training pipeline parallax-opt runs for --emit=plan
//             (px-autodiff, px-optimizer kind=sgd lr=1, canonicalize, cse),
//             one step in a runtime Session: g = w_before - w_after (exact up
//             to f64 rounding; sparse gradients go through sgd's row update)
//   numeric   the loss function alone (canonicalize, cse), and for each
//             element of each trainable variable the central difference
//             (L(w + h e_i) - L(w - h e_i)) / 2h, h = 1e-6
//
// and |analytic - numeric| <= 1e-6 + 1e-5 |numeric| element by element. Each
// case is `@main` with trainable variables initialised from seeded random
// literals (kept away from the ops' kinks), integer operands as constants,
// and loss = sum over the op's float results r of reduce_sum(r * R_r) with
// R_r a random constant, so that the seed gradient is not all ones.
//
// The runtime and MLIR are the real ones, so a failure is a wrong gradient
// rule (lib/Transforms/Autodiff.cpp), a forward/backward kernel pair that
// disagree (lib/Runtime/Kernels), or a step that does not do what the IR
// says (optimizer placement, plan emission). A failure prints the case's IR;
// PARALLAX_GRADCHECK_DUMP=1 also prints both modules after the pipeline.
//
//===----------------------------------------------------------------------===//

#include "parallax/Dialect/Px/PxDialect.h"
#include "parallax/Runtime/Session.h"
#include "parallax/Target/PlanEmitter.h"
#include "parallax/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

using namespace parallax;

namespace {

using Shape = std::vector<int64_t>;

int64_t numel(const Shape &s) {
  int64_t n = 1;
  for (int64_t d : s)
    n *= d;
  return n;
}

std::string tensorType(const Shape &s, const std::string &elem) {
  std::string t = "tensor<";
  for (int64_t d : s)
    t += std::to_string(d) + "x";
  return t + elem + ">";
}

std::string fmt(double v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.17e", v);
  return buf;
}

std::string join(const std::vector<int64_t> &v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? ", " : "") + std::to_string(v[i]);
  return s;
}

/// `array<i64: 1, 2>`
std::string arr(const std::vector<int64_t> &v) {
  return v.empty() ? "array<i64>" : "array<i64: " + join(v) + ">";
}

/// A dense literal body: `[[a, b], [c, d]]`, or `a` for rank 0.
std::string literal(const Shape &shape,
                    const std::function<std::string(size_t)> &element) {
  if (shape.empty())
    return element(0);
  std::string out;
  size_t next = 0;
  std::function<void(size_t)> rec = [&](size_t d) {
    out += "[";
    for (int64_t i = 0; i < shape[d]; ++i) {
      if (i)
        out += ", ";
      if (d + 1 == shape.size())
        out += element(next++);
      else
        rec(d + 1);
    }
    out += "]";
  };
  rec(0);
  return out;
}

Shape broadcast(const Shape &a, const Shape &b) {
  size_t r = std::max(a.size(), b.size());
  Shape out(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t x = i < r - a.size() ? 1 : a[i - (r - a.size())];
    int64_t y = i < r - b.size() ? 1 : b[i - (r - b.size())];
    out[i] = x == 1 ? y : x;
  }
  return out;
}

/// lib/Dialect/Px/PxShapes.cpp's window rule.
int64_t windowOut(int64_t in, int64_t kernel, int64_t stride, int64_t padBegin,
                  int64_t padEnd, int64_t dilation, bool ceilMode) {
  int64_t span = in + padBegin + padEnd - (dilation * (kernel - 1) + 1);
  int64_t out = (ceilMode ? (span + stride - 1) / stride : span / stride) + 1;
  if (ceilMode && (out - 1) * stride >= in + padBegin)
    --out;
  return out;
}

//===----------------------------------------------------------------------===//
// Cases: px IR text built from seeded random values.
//===----------------------------------------------------------------------===//

struct Tolerance {
  double atol = 1e-6, rtol = 1e-5;
};

struct VariableGrad {
  std::string name;
  Shape shape;
  std::vector<double> values;
};
using Gradients = std::vector<VariableGrad>;

class Compiler;

struct GradCase {
  std::string name;
  std::string ir;
  double h = 1e-6;
  Tolerance tol;
  /// The loss does not depend on the variables (x - x): skip the check that
  /// some numeric gradient is non-zero.
  bool zeroGradient = false;
  /// Optional extra check (dropout's mask), given the analytic gradients.
  std::function<testing::AssertionResult(Compiler &, const Gradients &)> extra;
};

/// Builds the text of one `@main`: variables, constants, ops, and the loss
/// sum(result * R) over the results passed to loss().
class Graph {
public:
  explicit Graph(uint64_t seed) : rng(seed * 0x9E3779B97F4A7C15ull + 12345) {}

  // Random values (a fixed generator, so cases are the same everywhere).
  double uniform(double lo, double hi) {
    return lo + (hi - lo) * ((double)(rng() >> 11) * 0x1.0p-53);
  }
  int64_t integer(int64_t lo, int64_t hi) { // inclusive
    return lo + (int64_t)(rng() % (uint64_t)(hi - lo + 1));
  }
  std::vector<double> uniform(const Shape &s, double lo, double hi) {
    std::vector<double> v(numel(s));
    for (double &x : v)
      x = uniform(lo, hi);
    return v;
  }
  /// |v| in [lo, hi] with a random sign: away from 0 (relu, abs, ...).
  std::vector<double> signedMagnitude(const Shape &s, double lo, double hi) {
    std::vector<double> v = uniform(s, lo, hi);
    for (double &x : v)
      if (rng() & 1)
        x = -x;
    return v;
  }
  /// numel(s) values spread evenly over [lo, hi] (jittered, shuffled): no
  /// two closer than about half their spacing (max, max_pool).
  std::vector<double> distinct(const Shape &s, double lo, double hi) {
    int64_t n = numel(s);
    double step = (hi - lo) / n;
    std::vector<double> v(n);
    for (int64_t i = 0; i < n; ++i)
      v[i] = lo + (i + 0.5) * step + uniform(-0.2, 0.2) * step;
    shuffle(v);
    return v;
  }
  /// Uniform in [lo, hi] but at least `gap` away from every point (clip).
  std::vector<double> avoiding(const Shape &s, double lo, double hi,
                               const std::vector<double> &points, double gap) {
    std::vector<double> v(numel(s));
    for (double &x : v) {
      bool ok;
      do {
        x = uniform(lo, hi);
        ok = true;
        for (double p : points)
          ok &= std::fabs(x - p) >= gap;
      } while (!ok);
    }
    return v;
  }
  template <typename T> void shuffle(std::vector<T> &v) {
    for (size_t i = v.size(); i > 1; --i)
      std::swap(v[i - 1], v[rng() % i]);
  }

  // Leaves.
  std::string var(const std::string &name, const Shape &s,
                  const std::vector<double> &values, bool trainable = true) {
    std::string v = "%" + name;
    add(v + " = px.variable \"" + name + "\"" + (trainable ? " trainable" : "") +
        " = dense<" + floats(s, values) + "> : " + tensorType(s, "f64"));
    types[v] = {s, "f64"};
    return v;
  }
  std::string var(const std::string &name, const Shape &s, double lo, double hi) {
    return var(name, s, uniform(s, lo, hi));
  }
  std::string constant(const Shape &s, const std::vector<double> &values) {
    return op("px.constant dense<" + floats(s, values) + "> : " +
                  tensorType(s, "f64"),
              s);
  }
  std::string indices(const Shape &s, const std::vector<int64_t> &values,
                      const std::string &elem = "i64") {
    return op("px.constant dense<" +
                  literal(s, [&](size_t i) { return std::to_string(values.at(i)); }) +
                  "> : " + tensorType(s, elem),
              s, elem);
  }
  std::string mask(const Shape &s, const std::vector<bool> &values) {
    return op("px.constant dense<" +
                  literal(s, [&](size_t i) {
                    return std::string(values.at(i) ? "true" : "false");
                  }) +
                  "> : " + tensorType(s, "i1"),
              s, "i1");
  }

  // Ops. `rhs` is everything right of `=`; the result types are given since
  // the assembly formats show only operand types.
  std::string op(const std::string &rhs, const Shape &s,
                 const std::string &elem = "f64") {
    std::string v = "%t" + std::to_string(counter++);
    add(v + " = " + rhs);
    types[v] = {s, elem};
    return v;
  }
  std::vector<std::string>
  ops(const std::string &rhs, const std::vector<std::pair<Shape, std::string>> &rs) {
    std::string v = "%t" + std::to_string(counter++);
    add(v + ":" + std::to_string(rs.size()) + " = " + rhs);
    std::vector<std::string> out;
    for (size_t i = 0; i < rs.size(); ++i) {
      out.push_back(v + "#" + std::to_string(i));
      types[out.back()] = rs[i];
    }
    return out;
  }
  std::string binary(const std::string &name, const std::string &a,
                     const std::string &b) {
    return op("px." + name + " " + a + ", " + b + " : " + type(a) + ", " + type(b),
              broadcast(shape(a), shape(b)));
  }
  std::string unary(const std::string &name, const std::string &a,
                    const std::string &attrs = "") {
    return op("px." + name + " " + a + (attrs.empty() ? "" : " " + attrs) +
                  " : " + type(a),
              shape(a));
  }

  /// Adds sum(value * R) to the loss, R random in [-1, 1].
  void loss(const std::string &value) {
    const Shape &s = shape(value);
    std::vector<double> r = uniform(s, -1, 1);
    weights.push_back(r);
    std::string R = constant(s, r);
    std::string p = binary("mul", value, R);
    if (s.empty()) {
      terms.push_back(p);
      return;
    }
    std::vector<int64_t> axes(s.size());
    for (size_t i = 0; i < s.size(); ++i)
      axes[i] = i;
    terms.push_back(op("px.reduce_sum " + p + " {axes = " + arr(axes) +
                           ", keepdims = false} : " + type(p),
                       {}));
  }
  /// Returns `value` from @main after the loss (not part of it).
  void result(const std::string &value) { extras.push_back(value); }

  const Shape &shape(const std::string &v) const { return types.at(v).first; }
  std::string type(const std::string &v) const {
    return tensorType(types.at(v).first, types.at(v).second);
  }

  std::string ir() const {
    std::vector<std::string> body = lines;
    std::string total = terms.at(0);
    for (size_t i = 1; i < terms.size(); ++i) {
      std::string next = "%loss" + std::to_string(i);
      body.push_back(next + " = px.add " + total + ", " + terms[i] +
                     " : tensor<f64>, tensor<f64>");
      total = next;
    }
    std::string resultTypes = "tensor<f64>", results = total;
    for (const std::string &e : extras) {
      resultTypes += ", " + type(e);
      results += ", " + e;
    }
    std::ostringstream os;
    os << "func.func @main() -> (" << resultTypes
       << ") attributes {px.loss = 0 : i64} {\n";
    for (const std::string &l : body)
      os << "  " << l << "\n";
    os << "  return " << results << " : " << resultTypes << "\n}\n";
    return os.str();
  }

  GradCase done(const std::string &name, double h = 1e-6) const {
    GradCase c;
    c.name = name;
    c.ir = ir();
    c.h = h;
    return c;
  }

  /// The R of each loss() term, in order.
  std::vector<std::vector<double>> weights;

private:
  void add(const std::string &line) { lines.push_back(line); }
  static std::string floats(const Shape &s, const std::vector<double> &v) {
    if ((int64_t)v.size() != numel(s)) {
      ADD_FAILURE() << "literal of " << v.size() << " values for "
                    << tensorType(s, "f64");
      return "0.0";
    }
    return literal(s, [&](size_t i) { return fmt(v[i]); });
  }

  std::mt19937_64 rng;
  std::vector<std::string> lines, terms, extras;
  std::map<std::string, std::pair<Shape, std::string>> types;
  int counter = 0;
};

//===----------------------------------------------------------------------===//
// Compiling and running.
//===----------------------------------------------------------------------===//

class Compiler {
public:
  Compiler() : context(makeRegistry(), mlir::MLIRContext::Threading::DISABLED) {
    context.loadAllAvailableDialects();
  }

  /// Parses `ir`, runs parallax-opt's pipeline (training: px-autodiff,
  /// px-optimizer sgd lr=1, canonicalize, cse; otherwise the cleanup only)
  /// and emits the plan. Throws std::runtime_error with the diagnostics.
  rt::Plan compile(const std::string &ir, bool train) {
    std::string diags;
    mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &d) {
      std::string loc;
      llvm::raw_string_ostream os(loc);
      d.getLocation().print(os);
      diags += loc + ": " + d.str() + "\n";
      return mlir::success();
    });
    mlir::OwningOpRef<mlir::ModuleOp> module =
        mlir::parseSourceString<mlir::ModuleOp>(ir, &context);
    if (!module)
      throw std::runtime_error("cannot parse the case:\n" + diags);
    mlir::PassManager pm(&context);
    if (train) {
      PxOptimizerOptions opt;
      opt.kind = "sgd";
      opt.lr = 1.0;
      pm.addPass(createPxAutodiff());
      pm.addPass(createPxOptimizer(opt));
    }
    pm.addPass(mlir::createCanonicalizerPass());
    pm.addPass(mlir::createCSEPass());
    if (mlir::failed(pm.run(*module)))
      throw std::runtime_error(std::string(train ? "training" : "forward") +
                               " pipeline failed:\n" + diags);
    // PARALLAX_GRADCHECK_DUMP=1 prints each module as the plan is made of it.
    if (const char *dump = std::getenv("PARALLAX_GRADCHECK_DUMP"); dump && *dump)
      module->print(llvm::errs());
    auto plan = emitPlan(*module, PlanEmitOptions{});
    if (!plan)
      throw std::runtime_error(llvm::toString(plan.takeError()));
    return std::move(*plan);
  }

private:
  static mlir::DialectRegistry makeRegistry() {
    mlir::DialectRegistry registry;
    registry.insert<px::PxDialect, mlir::func::FuncDialect,
                    mlir::shard::ShardDialect>();
    return registry;
  }
  mlir::MLIRContext context;
};

std::vector<size_t> parameters(const rt::Session &s) {
  std::vector<size_t> out;
  const auto &vars = s.plan().variables;
  for (size_t i = 0; i < vars.size(); ++i) {
    if (vars[i].role != rt::PlanVariable::Role::Parameter)
      continue;
    if (vars[i].dtype != rt::DType::F64)
      throw std::runtime_error("variable '" + vars[i].name + "' is not f64");
    out.push_back(i);
  }
  return out;
}

/// One sgd step with lr = 1: the gradient is what the step subtracted.
Gradients analyticGradients(Compiler &c, const std::string &ir) {
  rt::Session s(c.compile(ir, /*train=*/true), rt::SessionOptions{});
  Gradients out;
  for (size_t i : parameters(s)) {
    rt::TensorView v = s.variable(i);
    const double *p = v.as<double>();
    out.push_back({s.plan().variables[i].name, v.shape,
                   std::vector<double>(p, p + v.numElements())});
  }
  s.runStep();
  size_t k = 0;
  for (size_t i : parameters(s)) {
    const double *p = s.variable(i).as<double>();
    for (size_t e = 0; e < out[k].values.size(); ++e)
      out[k].values[e] -= p[e];
    ++k;
  }
  return out;
}

/// Runs the forward plan once as step 1 (so dropout draws the mask the
/// training plan's first step draws) and returns the loss.
double lossAtStep1(rt::Session &s) {
  s.env().step = 0;
  s.runStep();
  return s.loss();
}

Gradients numericGradients(Compiler &c, const std::string &ir, double h) {
  rt::Session s(c.compile(ir, /*train=*/false), rt::SessionOptions{});
  Gradients out;
  for (size_t i : parameters(s)) {
    rt::TensorView v = s.variable(i);
    double *p = v.as<double>();
    VariableGrad g{s.plan().variables[i].name, v.shape,
                   std::vector<double>(v.numElements())};
    for (int64_t e = 0; e < v.numElements(); ++e) {
      double orig = p[e], up = orig + h, down = orig - h;
      p[e] = up;
      double lossUp = lossAtStep1(s);
      p[e] = down;
      double lossDown = lossAtStep1(s);
      p[e] = orig;
      g.values[e] = (lossUp - lossDown) / (up - down);
    }
    out.push_back(std::move(g));
  }
  return out;
}

std::string indexString(const Shape &shape, int64_t flat) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
  return "[" + join(idx) + "]";
}

/// Element-by-element comparison; the message names every variable and
/// element that differ (the first few per variable) with both values.
testing::AssertionResult gradientsAgree(const std::string &what,
                                        const Gradients &analytic,
                                        const Gradients &numeric,
                                        const Tolerance &tol) {
  std::ostringstream msg;
  msg.precision(10);
  int bad = 0;
  for (const VariableGrad &n : numeric) {
    const VariableGrad *a = nullptr;
    for (const VariableGrad &x : analytic)
      if (x.name == n.name)
        a = &x;
    if (!a || a->values.size() != n.values.size()) {
      msg << what << ": variable '" << n.name
          << "' has no analytic gradient of its size\n";
      ++bad;
      continue;
    }
    int badHere = 0;
    double worst = 0;
    for (size_t e = 0; e < n.values.size(); ++e) {
      double av = a->values[e], nv = n.values[e], diff = std::fabs(av - nv);
      if (diff <= tol.atol + tol.rtol * std::fabs(nv))
        continue; // NaN fails here too
      if (badHere < 6)
        msg << what << ": variable '" << n.name << "' element " << e
            << indexString(n.shape, e) << ": analytic " << av << ", numeric "
            << nv << " (|diff| " << diff << ")\n";
      worst = std::max(worst, diff);
      ++badHere;
    }
    if (badHere) {
      msg << what << ": variable '" << n.name << "': " << badHere << " of "
          << n.values.size() << " elements differ, worst |diff| " << worst
          << "\n";
      bad += badHere;
    }
  }
  if (numeric.empty()) {
    msg << what << ": no trainable variable\n";
    ++bad;
  }
  if (!bad)
    return testing::AssertionSuccess();
  return testing::AssertionFailure() << msg.str();
}

struct Stats {
  size_t cases = 0, elements = 0;
};

void runCase(Compiler &c, const GradCase &gc, Stats &stats) {
  try {
    Gradients a = analyticGradients(c, gc.ir);
    Gradients n = numericGradients(c, gc.ir, gc.h);
    // Guard against a vacuous pass (a loss the variables do not reach).
    double largest = 0;
    for (const VariableGrad &v : n)
      for (double x : v.values) {
        largest = std::max(largest, std::fabs(x));
        ++stats.elements;
      }
    ++stats.cases;
    if (!gc.zeroGradient && !(largest > 1e-3))
      ADD_FAILURE() << gc.name << ": every numeric gradient is ~0 (largest "
                    << largest << "): the case checks nothing";
    testing::AssertionResult ok = gradientsAgree(gc.name, a, n, gc.tol);
    if (!ok)
      ADD_FAILURE() << "gradient check failed: " << gc.name << "\n"
                    << ok.message() << "IR:\n"
                    << gc.ir;
    if (gc.extra) {
      testing::AssertionResult extra = gc.extra(c, a);
      if (!extra)
        ADD_FAILURE() << gc.name << ": " << extra.message();
    }
  } catch (const std::exception &e) {
    ADD_FAILURE() << gc.name << ": " << e.what() << "\nIR:\n" << gc.ir;
  }
}

void runCases(const std::vector<GradCase> &cases) {
  Compiler c;
  Stats stats;
  for (const GradCase &gc : cases)
    runCase(c, gc, stats);
  std::printf("%zu cases, %zu gradient elements checked\n", stats.cases,
              stats.elements);
}

//===----------------------------------------------------------------------===//
// Op helpers that know the result shapes.
//===----------------------------------------------------------------------===//

Shape matmulShape(Shape a, Shape b) {
  bool va = a.size() == 1, vb = b.size() == 1;
  if (va)
    a.insert(a.begin(), 1);
  if (vb)
    b.push_back(1);
  Shape batch = broadcast(Shape(a.begin(), a.end() - 2), Shape(b.begin(), b.end() - 2));
  if (!va)
    batch.push_back(a[a.size() - 2]);
  if (!vb)
    batch.push_back(b.back());
  return batch;
}

std::string matmul(Graph &g, const std::string &a, const std::string &b) {
  return g.op("px.matmul " + a + ", " + b + " : " + g.type(a) + ", " + g.type(b),
              matmulShape(g.shape(a), g.shape(b)));
}

std::string gemm(Graph &g, const std::string &a, const std::string &b,
                 const std::string &c, bool ta, bool tb, double alpha,
                 double beta) {
  const Shape &as = g.shape(a), &bs = g.shape(b);
  Shape out{ta ? as[1] : as[0], tb ? bs[0] : bs[1]};
  std::vector<std::string> attrs;
  if (alpha != 1.0)
    attrs.push_back("alpha = " + fmt(alpha) + " : f32");
  if (beta != 1.0)
    attrs.push_back("beta = " + fmt(beta) + " : f32");
  if (ta)
    attrs.push_back("trans_a");
  if (tb)
    attrs.push_back("trans_b");
  std::string dict;
  for (size_t i = 0; i < attrs.size(); ++i)
    dict += (i ? ", " : "") + attrs[i];
  return g.op("px.gemm " + a + ", " + b + (c.empty() ? "" : ", " + c) +
                  (dict.empty() ? "" : " {" + dict + "}") + " : " + g.type(a) +
                  ", " + g.type(b) + (c.empty() ? "" : ", " + g.type(c)),
              out);
}

std::string reduce(Graph &g, const std::string &name, const std::string &x,
                   std::vector<int64_t> axes, bool keepdims) {
  Shape s = g.shape(x), out;
  int64_t r = s.size();
  for (int64_t &a : axes)
    a = a < 0 ? a + r : a;
  for (int64_t d = 0; d < r; ++d) {
    bool reduced = std::find(axes.begin(), axes.end(), d) != axes.end();
    if (!reduced)
      out.push_back(s[d]);
    else if (keepdims)
      out.push_back(1);
  }
  return g.op("px." + name + " " + x + " {axes = " + arr(axes) +
                  ", keepdims = " + (keepdims ? "true" : "false") + "} : " +
                  g.type(x),
              out);
}

std::string gather(Graph &g, const std::string &data, const std::string &idx,
                   int64_t axis) {
  Shape d = g.shape(data), out;
  int64_t a = axis < 0 ? axis + (int64_t)d.size() : axis;
  out.insert(out.end(), d.begin(), d.begin() + a);
  const Shape &is = g.shape(idx);
  out.insert(out.end(), is.begin(), is.end());
  out.insert(out.end(), d.begin() + a + 1, d.end());
  return g.op("px.gather " + data + "[" + idx + "] {axis = " +
                  std::to_string(axis) + " : i64} : " + g.type(data) + ", " +
                  g.type(idx),
              out);
}

std::string conv(Graph &g, const std::string &x, const std::string &w,
                 const std::string &b, std::vector<int64_t> strides,
                 std::vector<int64_t> pads, std::vector<int64_t> dilations,
                 int64_t group = 1) {
  const Shape &xs = g.shape(x), &ws = g.shape(w);
  size_t k = xs.size() - 2;
  Shape out{xs[0], ws[0]};
  for (size_t i = 0; i < k; ++i)
    out.push_back(windowOut(xs[2 + i], ws[2 + i], strides[i], pads[i],
                            pads[k + i], dilations[i], false));
  return g.op("px.conv " + x + ", " + w + (b.empty() ? "" : ", " + b) +
                  " {dilations = " + arr(dilations) +
                  (group != 1 ? ", group = " + std::to_string(group) + " : i64"
                              : "") +
                  ", pads = " + arr(pads) + ", strides = " + arr(strides) +
                  "} : " + g.type(x) + ", " + g.type(w) +
                  (b.empty() ? "" : ", " + g.type(b)),
              out);
}

std::string maxPool(Graph &g, const std::string &x, std::vector<int64_t> kernel,
                    std::vector<int64_t> strides, std::vector<int64_t> pads,
                    std::vector<int64_t> dilations, bool ceil) {
  const Shape &xs = g.shape(x);
  size_t k = xs.size() - 2;
  Shape out{xs[0], xs[1]};
  for (size_t i = 0; i < k; ++i)
    out.push_back(windowOut(xs[2 + i], kernel[i], strides[i], pads[i],
                            pads[k + i], dilations[i], ceil));
  return g.op("px.max_pool " + x + " {" + (ceil ? "ceil_mode, " : "") +
                  "dilations = " + arr(dilations) +
                  ", kernel_shape = " + arr(kernel) + ", pads = " + arr(pads) +
                  ", strides = " + arr(strides) + "} : " + g.type(x),
              out);
}

std::string avgPool(Graph &g, const std::string &x, std::vector<int64_t> kernel,
                    std::vector<int64_t> strides, std::vector<int64_t> pads,
                    bool ceil, bool countPad) {
  const Shape &xs = g.shape(x);
  size_t k = xs.size() - 2;
  Shape out{xs[0], xs[1]};
  for (size_t i = 0; i < k; ++i)
    out.push_back(
        windowOut(xs[2 + i], kernel[i], strides[i], pads[i], pads[k + i], 1, ceil));
  return g.op("px.avg_pool " + x + " {" + (ceil ? "ceil_mode, " : "") +
                  (countPad ? "count_include_pad, " : "") +
                  "kernel_shape = " + arr(kernel) + ", pads = " + arr(pads) +
                  ", strides = " + arr(strides) + "} : " + g.type(x),
              out);
}

/// {loss, log_prob} of px.softmax_cross_entropy_loss.
std::vector<std::string> sce(Graph &g, const std::string &scores,
                             const std::string &labels, const std::string &weights,
                             const std::string &reduction,
                             std::optional<int64_t> ignore) {
  std::vector<std::string> attrs;
  if (ignore)
    attrs.push_back("ignore_index = " + std::to_string(*ignore) + " : i64");
  if (!reduction.empty())
    attrs.push_back("reduction = \"" + reduction + "\"");
  std::string dict;
  for (size_t i = 0; i < attrs.size(); ++i)
    dict += (i ? ", " : "") + attrs[i];
  Shape lossShape = reduction == "none" ? g.shape(labels) : Shape{};
  return g.ops("px.softmax_cross_entropy_loss " + scores + ", " + labels +
                   (weights.empty() ? "" : ", " + weights) +
                   (dict.empty() ? "" : " {" + dict + "}") + " : " +
                   g.type(scores) + ", " + g.type(labels) +
                   (weights.empty() ? "" : ", " + g.type(weights)),
               {{lossShape, "f64"}, {g.shape(scores), "f64"}});
}

std::string nll(Graph &g, const std::string &input, const std::string &target,
                const std::string &weights, const std::string &reduction,
                std::optional<int64_t> ignore) {
  std::vector<std::string> attrs;
  if (ignore)
    attrs.push_back("ignore_index = " + std::to_string(*ignore) + " : i64");
  if (!reduction.empty())
    attrs.push_back("reduction = \"" + reduction + "\"");
  std::string dict;
  for (size_t i = 0; i < attrs.size(); ++i)
    dict += (i ? ", " : "") + attrs[i];
  Shape lossShape = reduction == "none" ? g.shape(target) : Shape{};
  return g.op("px.nll_loss " + input + ", " + target +
                  (weights.empty() ? "" : ", " + weights) +
                  (dict.empty() ? "" : " {" + dict + "}") + " : " +
                  g.type(input) + ", " + g.type(target) +
                  (weights.empty() ? "" : ", " + g.type(weights)),
              lossShape);
}

std::vector<int64_t> randomLabels(Graph &g, const Shape &s, int64_t classes) {
  std::vector<int64_t> v(numel(s));
  for (int64_t &x : v)
    x = g.integer(0, classes - 1);
  return v;
}

//===----------------------------------------------------------------------===//
// The cases, one generator per op family.
//===----------------------------------------------------------------------===//

std::vector<GradCase> arithmeticCases() {
  std::vector<GradCase> cases;
  struct Shapes {
    Shape a, b;
    const char *what;
  };
  const Shapes shapes[] = {{{3, 4}, {3, 4}, "3x4, 3x4"},
                           {{3, 1, 4}, {2, 4}, "3x1x4, 2x4 (broadcast)"},
                           {{2, 4}, {3, 1, 4}, "2x4, 3x1x4 (broadcast)"},
                           {{}, {2, 3}, "scalar, 2x3"},
                           {{2, 3}, {3}, "2x3, 3"},
                           {{4, 1}, {1, 3}, "4x1, 1x3"}};
  uint64_t seed = 100;
  for (std::string name : {"add", "sub", "mul", "div"})
    for (const Shapes &s : shapes) {
      Graph g(seed++);
      std::string a = g.var("a", s.a, -1, 1);
      std::string b = g.var("b", s.b,
                            name == "div" ? g.signedMagnitude(s.b, 0.5, 1.5)
                                          : g.uniform(s.b, -1, 1));
      g.loss(g.binary(name, a, b));
      cases.push_back(g.done(name + " " + s.what));
    }
  // One variable on both sides: the two contributions add up.
  for (std::string name : {"add", "sub", "mul", "div"}) {
    Graph g(seed++);
    std::string x = g.var("x", {2, 3}, g.signedMagnitude({2, 3}, 0.5, 1.5));
    g.loss(g.binary(name, x, x));
    cases.push_back(g.done(name + " x, x"));
    cases.back().zeroGradient = name == "sub" || name == "div";
  }
  // Only one operand trainable.
  {
    Graph g(seed++);
    std::string x = g.var("x", {2, 3}, g.signedMagnitude({2, 3}, 0.5, 1.5));
    std::string c = g.constant({3}, g.uniform({3}, -1, 1));
    g.loss(g.binary("div", c, x));
    g.loss(g.binary("sub", c, x));
    cases.push_back(g.done("div, sub with a constant lhs"));
  }
  return cases;
}

std::vector<GradCase> powCases() {
  std::vector<GradCase> cases;
  uint64_t seed = 200;
  {
    Graph g(seed++);
    std::string x = g.var("x", {3, 1, 4}, 0.5, 2.0);
    std::string p = g.var("p", {2, 4}, -1.5, 2.5);
    g.loss(g.binary("pow", x, p));
    cases.push_back(g.done("pow base 3x1x4, exponent 2x4"));
  }
  {
    Graph g(seed++);
    std::string x = g.var("x", {4}, 0.5, 2.0);
    std::string p = g.var("p", {3, 4}, -1.5, 2.5);
    g.loss(g.binary("pow", x, p));
    cases.push_back(g.done("pow base 4, exponent 3x4"));
  }
  {
    Graph g(seed++);
    std::string x = g.var("x", {2, 3}, 0.5, 2.0);
    std::string p = g.var("p", {}, {1.7});
    g.loss(g.binary("pow", x, p));
    cases.push_back(g.done("pow base 2x3, scalar exponent"));
  }
  {
    Graph g(seed++);
    std::string x = g.var("x", {2, 3}, g.signedMagnitude({2, 3}, 0.5, 1.5));
    std::string e = g.indices({3}, {2, 3, -1});
    g.loss(g.binary("pow", x, e));
    cases.push_back(g.done("pow signed base, integer exponent constant"));
  }
  {
    Graph g(seed++);
    std::string c = g.constant({2, 3}, g.uniform({2, 3}, 0.5, 2.0));
    std::string p = g.var("p", {2, 3}, -1.5, 2.5);
    g.loss(g.binary("pow", c, p));
    cases.push_back(g.done("pow constant base, exponent"));
  }
  return cases;
}

std::vector<GradCase> maxMinCases() {
  std::vector<GradCase> cases;
  uint64_t seed = 300;
  // a on a grid of 0.1, b offset by 0.05: no pair closer than 0.03.
  auto grid = [](Graph &g, const Shape &s, double offset) {
    std::vector<double> v(numel(s));
    for (double &x : v)
      x = 0.1 * g.integer(-10, 10) + offset + g.uniform(-0.01, 0.01);
    return v;
  };
  struct Shapes {
    Shape a, b;
    const char *what;
  };
  const Shapes shapes[] = {{{3, 4}, {3, 4}, "3x4, 3x4"},
                           {{3, 1, 4}, {2, 4}, "3x1x4, 2x4 (broadcast)"},
                           {{2, 3}, {}, "2x3, scalar"}};
  for (std::string name : {"max", "min"}) {
    for (const Shapes &s : shapes) {
      Graph g(seed++);
      std::string a = g.var("a", s.a, grid(g, s.a, 0.0));
      std::string b = g.var("b", s.b, grid(g, s.b, 0.05));
      g.loss(g.binary(name, a, b));
      cases.push_back(g.done(name + " " + s.what));
    }
    // Exact ties split the gradient evenly, which is what the central
    // difference sees too.
    {
      Graph g(seed++);
      std::vector<double> av = grid(g, {2, 3}, 0.0), bv = grid(g, {2, 3}, 0.05);
      bv[1] = av[1];
      bv[4] = av[4];
      std::string a = g.var("a", {2, 3}, av), b = g.var("b", {2, 3}, bv);
      g.loss(g.binary(name, a, b));
      cases.push_back(g.done(name + " with ties"));
    }
    {
      Graph g(seed++);
      std::string x = g.var("x", {2, 3}, -1, 1);
      g.loss(g.binary(name, x, x));
      cases.push_back(g.done(name + " x, x"));
    }
  }
  return cases;
}

std::vector<GradCase> whereCases() {
  std::vector<GradCase> cases;
  uint64_t seed = 400;
  auto bools = [](Graph &g, int64_t n) {
    std::vector<bool> v(n);
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = g.integer(0, 1);
    return v;
  };
  {
    Graph g(seed++);
    std::string c = g.mask({3, 2, 1}, bools(g, 6));
    std::string x = g.var("x", {2, 4}, -1, 1);
    std::string y = g.var("y", {3, 1, 4}, -1, 1);
    g.loss(g.op("px.where " + c + ", " + x + ", " + y + " : " + g.type(c) + ", " +
                    g.type(x) + ", " + g.type(y),
                {3, 2, 4}));
    cases.push_back(g.done("where cond 3x2x1, x 2x4, y 3x1x4"));
  }
  {
    Graph g(seed++);
    std::string c = g.mask({3, 4}, bools(g, 12));
    std::string x = g.var("x", {3, 4}, -1, 1);
    std::string y = g.constant({}, {0.25});
    g.loss(g.op("px.where " + c + ", " + x + ", " + y + " : " + g.type(c) + ", " +
                    g.type(x) + ", " + g.type(y),
                {3, 4}));
    cases.push_back(g.done("where x 3x4, constant scalar y"));
  }
  {
    Graph g(seed++);
    std::string c = g.mask({2, 3}, bools(g, 6));
    std::string y = g.var("y", {}, {0.3});
    std::string x = g.constant({2, 3}, g.uniform({2, 3}, -1, 1));
    g.loss(g.op("px.where " + c + ", " + x + ", " + y + " : " + g.type(c) + ", " +
                    g.type(x) + ", " + g.type(y),
                {2, 3}));
    cases.push_back(g.done("where trainable scalar y"));
  }
  return cases;
}

std::vector<GradCase> unaryCases() {
  std::vector<GradCase> cases;
  uint64_t seed = 500;
  struct Unary {
    const char *name, *attrs;
    std::function<std::vector<double>(Graph &, const Shape &)> values;
  };
  auto range = [](double lo, double hi) {
    return [=](Graph &g, const Shape &s) { return g.uniform(s, lo, hi); };
  };
  auto away = [](double lo, double hi) {
    return [=](Graph &g, const Shape &s) { return g.signedMagnitude(s, lo, hi); };
  };
  const Unary ops[] = {
      {"neg", "", range(-1, 1)},
      {"abs", "", away(0.1, 1)},
      {"sqrt", "", range(0.5, 2)},
      {"reciprocal", "", away(0.5, 2)},
      {"exp", "", range(-1.5, 1.5)},
      {"log", "", range(0.5, 2)},
      {"relu", "", away(0.1, 1)},
      {"leaky_relu", "", away(0.1, 1)},
      {"leaky_relu", "{alpha = 2.000000e-01 : f32}", away(0.1, 1)},
      {"tanh", "", range(-2, 2)},
      {"sigmoid", "", range(-3, 3)},
      {"erf", "", range(-1.5, 1.5)},
  };
  for (const Unary &u : ops)
    for (const Shape &s : {Shape{3, 4}, Shape{2, 1, 3}}) {
      Graph g(seed++);
      std::string x = g.var("x", s, u.values(g, s));
      g.loss(g.unary(u.name, x, u.attrs));
      std::string shape = s.size() == 2 ? " 3x4" : " 2x1x3";
      cases.push_back(g.done(std::string(u.name) + (*u.attrs ? " alpha 0.2" : "") +
                             shape));
    }
  // Scalar input.
  {
    Graph g(seed++);
    std::string x = g.var("x", {}, {0.7});
    g.loss(g.unary("tanh", x));
    cases.push_back(g.done("tanh scalar"));
  }
  // Clip: away from the bounds.
  struct Clip {
    const char *attrs, *what;
  };
  for (Clip c : {Clip{"{max = 5.000000e-01 : f64, min = -5.000000e-01 : f64}",
                      "clip [-0.5, 0.5]"},
                 Clip{"{min = -2.500000e-01 : f64}", "clip min -0.25"},
                 Clip{"{max = 2.500000e-01 : f64}", "clip max 0.25"},
                 Clip{"", "clip unbounded"}}) {
    Graph g(seed++);
    std::string x =
        g.var("x", {3, 5}, g.avoiding({3, 5}, -1, 1, {-0.5, 0.5, -0.25, 0.25}, 0.05));
    g.loss(g.unary("clip", x, c.attrs));
    cases.push_back(g.done(c.what));
  }
  return cases;
}

std::vector<GradCase> castCases() {
  // f64 -> f32 -> f64 is exact for these values (multiples of 2^-8 in
  // [-2, 2], and h = 2^-10), so the loss stays linear in x and the central
  // difference is exact; the analytic gradient is R rounded to f32.
  std::vector<GradCase> cases;
  Graph g(600);
  Shape s{3, 4};
  std::vector<double> v(numel(s));
  for (double &x : v)
    x = g.integer(-512, 512) / 256.0;
  std::string x = g.var("x", s, v);
  std::string f = g.op("px.cast " + x + " : " + g.type(x) + " -> " +
                           tensorType(s, "f32"),
                       s, "f32");
  std::string d = g.op("px.cast " + f + " : " + g.type(f) + " -> " +
                           tensorType(s, "f64"),
                       s);
  g.loss(d);
  GradCase c = g.done("cast f64 -> f32 -> f64", /*h=*/0x1.0p-10);
  cases.push_back(c);
  return cases;
}

std::vector<GradCase> gatherCases() {
  std::vector<GradCase> cases;
  uint64_t seed = 700;
  {
    // Dense: data is also read by tanh, so its gather gradient is a
    // scatter_add, with repeated (0, -5) and negative indices.
    Graph g(seed++);
    std::string d = g.var("data", {5, 3}, -1, 1);
    std::string i = g.indices({2, 3}, {0, -1, 2, 4, 0, -5});
    g.loss(gather(g, d, i, 0));
    g.loss(g.unary("tanh", d));
    cases.push_back(g.done("gather dense axis 0, repeated and negative indices"));
  }
  {
    Graph g(seed++);
    std::string d = g.var("data", {3, 5}, -1, 1);
    std::string i = g.indices({4}, {1, -1, 1, 3}, "i32");
    g.loss(gather(g, d, i, 1));
    cases.push_back(g.done("gather axis 1, i32 indices"));
  }
  {
    Graph g(seed++);
    std::string d = g.var("data", {2, 3, 4}, -1, 1);
    std::string i = g.indices({}, {-2});
    g.loss(gather(g, d, i, -1));
    cases.push_back(g.done("gather axis -1, scalar index"));
  }
  {
    // Sparse: an embedding read only by gathers on axis 0 gets row-sparse
    // gradients (three reads concatenated, one a scalar index), applied by
    // sgd row by row, repeated rows summed, negative ids wrapped.
    Graph g(seed++);
    std::string e = g.var("emb", {6, 3}, -1, 1);
    std::string i1 = g.indices({2, 4}, {1, 4, -2, 1, 0, 5, -6, 1});
    std::string i2 = g.indices({3}, {5, -1, 2}, "i32");
    std::string i3 = g.indices({}, {-3});
    g.loss(g.unary("tanh", gather(g, e, i1, 0)));
    g.loss(gather(g, e, i2, 0));
    g.loss(gather(g, e, i3, 0));
    cases.push_back(g.done("gather sparse embedding, three reads"));
  }
  {
    Graph g(seed++);
    std::string e = g.var("emb", {5, 2, 2}, -1, 1);
    std::string i = g.indices({3, 2}, {4, 4, 0, -1, 2, 4});
    g.loss(gather(g, e, i, 0));
    cases.push_back(g.done("gather sparse 5x2x2 embedding"));
  }
  // gather_elements.
  auto gatherElements = [](Graph &g, const std::string &d, const std::string &i,
                           int64_t axis) {
    return g.op("px.gather_elements " + d + "[" + i + "] {axis = " +
                    std::to_string(axis) + " : i64} : " + g.type(d) + ", " +
                    g.type(i),
                g.shape(i));
  };
  {
    Graph g(seed++);
    std::string d = g.var("data", {3, 4}, -1, 1);
    std::string i = g.indices({3, 2}, {0, 3, 1, 1, 2, -1});
    g.loss(gatherElements(g, d, i, 1));
    cases.push_back(g.done("gather_elements axis 1, repeated and negative"));
  }
  {
    Graph g(seed++);
    std::string d = g.var("data", {3, 4}, -1, 1);
    std::string i = g.indices({2, 4}, {0, 2, 2, 1, 2, 2, 0, 0});
    g.loss(gatherElements(g, d, i, 0));
    cases.push_back(g.done("gather_elements axis 0"));
  }
  {
    Graph g(seed++);
    std::string d = g.var("data", {2, 3, 2}, -1, 1);
    std::string i = g.indices({2, 2, 2}, {2, 0, 1, 1, 0, 2, 2, 2}, "i32");
    g.loss(gatherElements(g, d, i, 1));
    cases.push_back(g.done("gather_elements 3-D axis 1, i32"));
  }
  return cases;
}

std::vector<GradCase> sliceCases() {
  std::vector<GradCase> cases;
  uint64_t seed = 800;
  auto slice = [](Graph &g, const std::string &x, std::vector<int64_t> starts,
                  std::vector<int64_t> steps, Shape out) {
    return g.op("px.slice " + x + " starts = [" + join(starts) + "] steps = [" +
                    join(steps) + "] : " + g.type(x) + " -> " +
                    tensorType(out, "f64"),
                out);
  };
  {
    Graph g(seed++);
    std::string x = g.var("x", {6, 5}, -1, 1);
    g.loss(slice(g, x, {1, 4}, {2, -1}, {3, 5}));
    cases.push_back(g.done("slice steps 2, -1"));
  }
  {
    Graph g(seed++);
    std::string x = g.var("x", {6, 5}, -1, 1);
    g.loss(slice(g, x, {5, 0}, {-2, 2}, {3, 3}));
    cases.push_back(g.done("slice steps -2, 2"));
  }
  {
    Graph g(seed++);
    std::string x = g.var("x", {2, 3, 4}, -1, 1);
    g.loss(slice(g, x, {1, 0, 3}, {1, 1, -3}, {1, 3, 2}));
    cases.push_back(g.done("slice 3-D step -3"));
  }
  {
    // Two overlapping slices of one variable (the Split pattern, overlapped).
    Graph g(seed++);
    std::string x = g.var("x", {5, 2}, -1, 1);
    g.loss(g.unary("tanh", slice(g, x, {0, 0}, {1, 1}, {3, 2})));
    g.loss(slice(g, x, {4, 1}, {-1, -1}, {3, 2}));
    cases.push_back(g.done("slice twice, overlapping"));
  }
  return cases;
}

std::vector<GradCase> matmulCases() {
  std::vector<GradCase> cases;
  uint64_t seed = 900;
  struct Shapes {
    Shape a, b;
    const char *what;
  };
  const Shapes shapes[] = {
      {{3, 4}, {4, 5}, "3x4 x 4x5"},
      {{2, 1, 3, 4}, {3, 4, 2}, "2x1x3x4 x 3x4x2 (broadcast batch)"},
      {{2, 3, 4}, {2, 4, 5}, "2x3x4 x 2x4x5"},
      {{2, 3, 4}, {4, 2}, "2x3x4 x 4x2 (shared rhs)"},
      {{4}, {2, 4, 3}, "4 x 2x4x3 (1-D lhs)"},
      {{2, 3, 4}, {4}, "2x3x4 x 4 (1-D rhs)"},
      {{3, 4}, {4}, "3x4 x 4"},
      {{4}, {4, 3}, "4 x 4x3"},
      {{4}, {4}, "4 x 4 (dot)"},
  };
  for (const Shapes &s : shapes) {
    Graph g(seed++);
    std::string a = g.var("a", s.a, -1, 1), b = g.var("b", s.b, -1, 1);
    g.loss(matmul(g, a, b));
    cases.push_back(g.done(std::string("matmul ") + s.what));
  }
  {
    Graph g(seed++);
    std::string a = g.constant({2, 3, 4}, g.uniform({2, 3, 4}, -1, 1));
    std::string b = g.var("b", {4, 2}, -1, 1);
    g.loss(matmul(g, a, b));
    cases.push_back(g.done("matmul constant lhs"));
  }
  {
    // A 1-D lhs that is computed rather than a variable: the rule's reshape
    // of it is then no view of variable storage that sgd updates in place.
    Graph g(seed++);
    std::string a = g.var("a", {4}, -1, 1), b = g.var("b", {2, 4, 3}, -1, 1);
    g.loss(matmul(g, g.unary("tanh", a), b));
    cases.push_back(g.done("matmul tanh(4) x 2x4x3 (computed 1-D lhs)"));
  }
  return cases;
}

std::vector<GradCase> gemmCases() {
  std::vector<GradCase> cases;
  uint64_t seed = 1000;
  const int64_t M = 3, K = 4, N = 5;
  struct C {
    Shape shape;
    const char *what;
  };
  const C cs[] = {{{N}, "C [N]"}, {{M, 1}, "C [M,1]"}, {{M, N}, "C [M,N]"},
                  {{}, "C scalar"}, {{1, N}, "C [1,N]"}};
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (const C &c : cs) {
        Graph g(seed++);
        std::string a = g.var("a", ta ? Shape{K, M} : Shape{M, K}, -1, 1);
        std::string b = g.var("b", tb ? Shape{N, K} : Shape{K, N}, -1, 1);
        std::string cv = g.var("c", c.shape, -1, 1);
        g.loss(gemm(g, a, b, cv, ta, tb, 0.5, 2.0));
        cases.push_back(g.done(std::string("gemm") + (ta ? " transA" : "") +
                               (tb ? " transB" : "") + " alpha 0.5 beta 2 " +
                               c.what));
      }
  {
    Graph g(seed++);
    std::string a = g.var("a", {M, K}, -1, 1), b = g.var("b", {N, K}, -1, 1);
    g.loss(gemm(g, a, b, "", false, true, 1.0, 1.0));
    cases.push_back(g.done("gemm transB, no C"));
  }
  {
    Graph g(seed++);
    std::string a = g.constant({K, M}, g.uniform({K, M}, -1, 1));
    std::string b = g.var("b", {K, N}, -1, 1);
    std::string c = g.var("c", {N}, -1, 1);
    g.loss(gemm(g, a, b, c, true, false, 1.0, 1.0));
    cases.push_back(g.done("gemm constant A (Linear), default alpha beta"));
  }
  return cases;
}

std::vector<GradCase> softmaxCases() {
  std::vector<GradCase> cases;
  uint64_t seed = 1100;
  struct S {
    Shape shape;
    int64_t axis;
    const char *what;
  };
  const S ss[] = {{{3, 4}, -1, "3x4 axis -1"},
                  {{3, 4}, 0, "3x4 axis 0"},
                  {{2, 3, 4}, 1, "2x3x4 axis 1"},
                  {{2, 3, 4}, 2, "2x3x4 axis 2"}};
  for (std::string name : {"softmax", "log_softmax"})
    for (const S &s : ss) {
      Graph g(seed++);
      std::string x = g.var("x", s.shape, -2, 2);
      g.loss(g.unary(name, x, "{axis = " + std::to_string(s.axis) + " : i64}"));
      cases.push_back(g.done(name + " " + s.what));
    }
  return cases;
}

std::vector<GradCase> lossCases() {
  std::vector<GradCase> cases;
  uint64_t seed = 1200;
  struct L {
    Shape scores;
    bool weights;
    std::string reduction;
    std::optional<int64_t> ignore;
    bool useIgnored; ///< put ignore_index among the labels
    const char *what;
  };
  const L ls[] = {
      {{4, 5}, false, "", std::nullopt, false, "4x5 mean"},
      {{4, 5}, false, "sum", std::nullopt, false, "4x5 sum"},
      {{4, 5}, false, "none", std::nullopt, false, "4x5 none"},
      {{4, 5}, true, "mean", std::nullopt, false, "4x5 mean, weights"},
      {{4, 5}, true, "sum", std::nullopt, false, "4x5 sum, weights"},
      {{4, 5}, true, "none", std::nullopt, false, "4x5 none, weights"},
      {{5, 4}, false, "mean", -100, true, "5x4 mean, ignore_index -100"},
      {{5, 4}, true, "mean", 1, true, "5x4 mean, weights, ignore_index 1"},
      {{5, 4}, true, "sum", 2, true, "5x4 sum, weights, ignore_index 2"},
      {{5, 4}, false, "none", 0, true, "5x4 none, ignore_index 0"},
      {{3, 4, 2}, false, "mean", std::nullopt, false, "3x4x2 mean"},
      {{3, 4, 2}, true, "mean", -1, true, "3x4x2 mean, weights, ignore_index -1"},
      {{3, 4, 2}, true, "none", std::nullopt, false, "3x4x2 none, weights"},
  };
  for (bool isNll : {false, true})
    for (const L &l : ls) {
      Graph g(seed++);
      int64_t classes = l.scores[1];
      Shape labelShape{l.scores[0]};
      labelShape.insert(labelShape.end(), l.scores.begin() + 2, l.scores.end());
      std::vector<int64_t> labels = randomLabels(g, labelShape, classes);
      if (l.useIgnored) {
        labels[1] = *l.ignore;
        // Keep at least one counted label for the mean.
        if (labels[0] == *l.ignore)
          labels[0] = (*l.ignore + 1 + classes) % classes;
      }
      std::string x = isNll ? g.var("x", l.scores, -2.5, 0)
                            : g.var("x", l.scores, -2, 2);
      std::string lab = g.indices(labelShape, labels);
      std::string w = l.weights ? g.constant({classes}, g.uniform({classes}, 0.25, 2))
                                : "";
      if (isNll) {
        g.loss(nll(g, x, lab, w, l.reduction, l.ignore));
      } else {
        auto r = sce(g, x, lab, w, l.reduction, l.ignore);
        g.loss(r[0]);
        g.loss(r[1]); // log_prob has a gradient too
      }
      cases.push_back(g.done(std::string(isNll ? "nll_loss " : "softmax_cross_entropy_loss ") +
                             l.what));
    }
  {
    // i32 labels, only the loss result used.
    Graph g(seed++);
    std::string x = g.var("x", {4, 3}, -2, 2);
    std::string lab = g.indices({4}, {2, 0, 1, 2}, "i32");
    g.loss(sce(g, x, lab, "", "", std::nullopt)[0]);
    cases.push_back(g.done("softmax_cross_entropy_loss i32 labels, loss only"));
  }
  {
    Graph g(seed++);
    std::string x = g.var("x", {4, 3}, -2, 2);
    std::string lab = g.indices({4}, {2, 0, 1, 2}, "i32");
    g.loss(sce(g, x, lab, "", "sum", std::nullopt)[1]);
    cases.push_back(g.done("softmax_cross_entropy_loss log_prob only"));
  }
  return cases;
}

std::vector<GradCase> layerNormCases() {
  std::vector<GradCase> cases;
  uint64_t seed = 1300;
  struct LN {
    Shape x, scale, bias; // empty bias shape with hasBias false
    bool hasBias;
    int64_t axis;
    const char *eps;
    const char *what;
  };
  const LN ls[] = {
      {{3, 5}, {5}, {5}, true, -1, nullptr, "3x5 axis -1, bias"},
      {{3, 5}, {5}, {}, false, -1, nullptr, "3x5 axis -1, no bias"},
      {{2, 3, 4}, {4}, {4}, true, -1, nullptr, "2x3x4 axis -1, bias"},
      {{2, 3, 4}, {3, 4}, {3, 4}, true, 1, nullptr, "2x3x4 axis 1, bias"},
      {{2, 3, 4}, {3, 4}, {}, false, 1, "1.000000e-03", "2x3x4 axis 1, no bias, epsilon 1e-3"},
      {{2, 3, 4}, {3, 4}, {4}, true, 1, nullptr, "2x3x4 axis 1, bias [4] broadcast"},
      {{2, 3, 4}, {4}, {3, 4}, true, 1, nullptr, "2x3x4 axis 1, scale [4] broadcast"},
      {{2, 3, 4}, {4}, {}, false, 1, nullptr, "2x3x4 axis 1, scale [4] broadcast, no bias"},
      {{2, 3, 4}, {3, 1}, {4}, true, 1, nullptr, "2x3x4 axis 1, scale [3,1], bias [4]"},
  };
  for (const LN &l : ls) {
    Graph g(seed++);
    std::string x = g.var("x", l.x, -1, 1);
    std::string s = g.var("scale", l.scale, 0.5, 1.5);
    std::string b = l.hasBias ? g.var("bias", l.bias, -1, 1) : "";
    int64_t axis = l.axis < 0 ? l.axis + (int64_t)l.x.size() : l.axis;
    Shape stat(l.x.begin(), l.x.begin() + axis);
    stat.resize(l.x.size(), 1);
    std::string attrs = "{axis = " + std::to_string(l.axis) + " : i64" +
                        (l.eps ? std::string(", epsilon = ") + l.eps + " : f32" : "") +
                        "}";
    auto r = g.ops("px.layer_norm " + x + ", " + s + (b.empty() ? "" : ", " + b) +
                       " " + attrs + " : " + g.type(x) + ", " + g.type(s) +
                       (b.empty() ? "" : ", " + g.type(b)),
                   {{l.x, "f64"}, {stat, "f64"}, {stat, "f64"}});
    // mean and inv_std_dev have no gradient rule (px-autodiff refuses them).
    g.loss(r[0]);
    cases.push_back(g.done(std::string("layer_norm ") + l.what));
  }
  return cases;
}

std::vector<GradCase> batchNormCases() {
  std::vector<GradCase> cases;
  uint64_t seed = 1400;
  struct BN {
    Shape x;
    bool training;
    const char *attrs;
    const char *what;
    bool trainableStats = false;
  };
  const BN bs[] = {
      {{4, 3, 2, 2}, true, "{training}", "training 4x3x2x2"},
      {{5, 3}, true, "{training}", "training 5x3"},
      {{3, 2, 4}, true, "{epsilon = 1.000000e-03 : f32, momentum = 8.000000e-01 : f32, training}",
       "training 3x2x4, epsilon 1e-3"},
      {{3, 2, 2, 2}, false, "", "inference 3x2x2x2"},
      {{4, 3}, false, "{epsilon = 1.000000e-03 : f32}", "inference 4x3, epsilon 1e-3"},
      {{3, 2, 2}, false, "", "inference 3x2x2, trainable statistics", true},
  };
  for (const BN &b : bs) {
    Graph g(seed++);
    int64_t c = b.x[1];
    bool trainableStats = b.trainableStats;
    std::string x = g.var("x", b.x, -1, 1);
    std::string scale = g.var("scale", {c}, 0.5, 1.5);
    std::string bias = g.var("bias", {c}, -1, 1);
    // Fixed statistics: non-trainable state, as the importer makes them
    // (one case makes them trainable: inference-mode y depends on them).
    std::string mean =
        g.var("running_mean", {c}, g.uniform({c}, -0.5, 0.5), trainableStats);
    std::string var =
        g.var("running_var", {c}, g.uniform({c}, 0.5, 1.5), trainableStats);
    auto r = g.ops("px.batch_norm " + x + ", " + scale + ", " + bias + ", " + mean +
                       ", " + var + (*b.attrs ? std::string(" ") + b.attrs : "") +
                       " : " + g.type(x) + ", " + g.type(scale),
                   {{b.x, "f64"}, {{c}, "f64"}, {{c}, "f64"}});
    g.loss(r[0]);
    cases.push_back(g.done(std::string("batch_norm ") + b.what));
  }
  return cases;
}

std::vector<GradCase> dropoutCases() {
  std::vector<GradCase> cases;
  uint64_t seed = 1500;
  struct D {
    double ratio;
    const char *attrs;
    Shape shape;
  };
  for (D d : {D{0.5, "{ratio = 5.000000e-01 : f32}", {4, 6}},
              D{0.25, "{ratio = 2.500000e-01 : f32, seed = 7 : i64}", {3, 2, 4}}}) {
    Graph g(seed++);
    std::string x = g.var("x", d.shape, -1, 1);
    auto r = g.ops("px.dropout " + x + " " + d.attrs + " : " + g.type(x),
                   {{d.shape, "f64"}, {d.shape, "i1"}});
    g.loss(r[0]);
    g.result(r[1]); // the mask, for the exact check
    GradCase c = g.done("dropout ratio " + std::to_string(d.ratio));
    // Exact check: dx = R * mask / (1 - ratio), with the mask the forward
    // plan draws at step 1 (the step the training plan ran).
    std::vector<double> R = g.weights[0];
    std::string ir = c.ir;
    double ratio = d.ratio;
    c.extra = [R, ir, ratio](Compiler &comp,
                             const Gradients &analytic) -> testing::AssertionResult {
      rt::Session s(comp.compile(ir, false), rt::SessionOptions{});
      lossAtStep1(s);
      rt::TensorView m = s.output(1);
      const uint8_t *mask = m.as<uint8_t>();
      int64_t kept = 0;
      for (int64_t e = 0; e < m.numElements(); ++e)
        kept += mask[e] != 0;
      if (kept == 0 || kept == m.numElements())
        return testing::AssertionFailure()
               << "mask keeps " << kept << " of " << m.numElements();
      Gradients expected{{"x", m.shape, std::vector<double>(m.numElements())}};
      for (int64_t e = 0; e < m.numElements(); ++e)
        expected[0].values[e] = mask[e] ? R[e] / (1.0 - ratio) : 0.0;
      return gradientsAgree("dropout mask check", analytic, expected,
                            Tolerance{1e-12, 1e-12});
    };
    cases.push_back(c);
  }
  return cases;
}

std::vector<GradCase> reductionCases() {
  std::vector<GradCase> cases;
  uint64_t seed = 1600;
  struct R {
    std::vector<int64_t> axes;
    bool keepdims;
    const char *what;
  };
  const R rs[] = {{{1}, true, "axes [1] keepdims"},
                  {{0, 2}, false, "axes [0, 2]"},
                  {{-1, 0}, true, "axes [-1, 0] keepdims"},
                  {{0, 1, 2}, false, "all axes"},
                  {{2}, false, "axes [2]"}};
  for (std::string name : {"reduce_sum", "reduce_mean", "reduce_max", "reduce_min",
                           "reduce_prod"})
    for (const R &r : rs) {
      Graph g(seed++);
      Shape s{2, 3, 4};
      bool extreme = name == "reduce_max" || name == "reduce_min";
      std::string x = g.var("x", s, extreme ? g.distinct(s, -1, 1)
                                    : name == "reduce_prod" ? g.signedMagnitude(s, 0.5, 1.5)
                                                            : g.uniform(s, -1, 1));
      g.loss(reduce(g, name, x, r.axes, r.keepdims));
      cases.push_back(g.done(name + " " + r.what));
    }
  {
    // Tied maxima share the gradient evenly, as the central difference sees.
    Graph g(seed++);
    std::string x = g.var("x", {2, 4}, {0.5, 0.9, -0.3, 0.9, 0.1, -0.2, 0.4, 0.3});
    g.loss(reduce(g, "reduce_max", x, {1}, false));
    cases.push_back(g.done("reduce_max with a tie"));
  }
  {
    Graph g(seed++);
    std::string x = g.var("x", {2, 4}, {0.5, -0.9, -0.3, -0.9, 0.1, -0.2, 0.4, 0.3});
    g.loss(reduce(g, "reduce_min", x, {1}, false));
    cases.push_back(g.done("reduce_min with a tie"));
  }
  {
    // Products with zeros: row 0 has one (the gradient there is the product
    // of the others), row 1 two (all gradients 0), row 2 none.
    Graph g(seed++);
    std::string x = g.var("x", {3, 4}, {0.5, 0.0, -1.5, 0.8, 0.0, 1.2, 0.0, -0.7,
                                         1.1, -0.6, 0.9, 1.3});
    g.loss(reduce(g, "reduce_prod", x, {1}, true));
    cases.push_back(g.done("reduce_prod with zeros"));
  }
  return cases;
}

/// Elementwise functions beyond the basic unary ops: trigonometric and
/// hyperbolic, the piecewise constant ones, mod.
std::vector<GradCase> functionCases() {
  std::vector<GradCase> cases;
  uint64_t seed = 2100;
  struct F {
    const char *name;
    double lo, hi;
  };
  const F fs[] = {{"sin", -3, 3},     {"cos", -3, 3},       {"tan", -1.2, 1.2},
                  {"asin", -0.9, 0.9}, {"acos", -0.9, 0.9}, {"atan", -3, 3},
                  {"sinh", -2, 2},    {"cosh", -2, 2},      {"asinh", -3, 3},
                  {"acosh", 1.2, 3},  {"atanh", -0.9, 0.9}};
  for (const F &f : fs) {
    Graph g(seed++);
    std::string x = g.var("x", {3, 4}, f.lo, f.hi);
    g.loss(g.unary(f.name, x));
    cases.push_back(g.done(f.name));
  }
  // Piecewise constant: no gradient flows through them; x + f(x) keeps one.
  std::vector<double> kinks;
  for (int k = -6; k <= 6; ++k)
    kinks.push_back(k * 0.5);
  for (const char *name : {"floor", "ceil", "round", "sign"}) {
    Graph g(seed++);
    std::string x = g.var("x", {3, 4}, g.avoiding({3, 4}, -2.9, 2.9, kinks, 0.05));
    g.loss(g.binary("add", x, g.unary(name, x)));
    cases.push_back(g.done(std::string(name) + " (zero gradient)"));
  }
  for (bool fmod : {false, true}) {
    // a / b kept away from integers, where mod jumps.
    Graph g(seed++);
    std::vector<double> a(12), bv(12);
    for (int i = 0; i < 12; ++i) {
      do {
        a[i] = g.uniform(-5, 5);
        bv[i] = g.uniform(1, 2) * (g.uniform(0, 1) < 0.5 ? -1 : 1);
      } while (std::fabs(a[i] / bv[i] - std::round(a[i] / bv[i])) < 0.05);
    }
    std::string x = g.var("a", {3, 4}, a), y = g.var("b", {3, 4}, bv);
    g.loss(g.op("px.mod " + x + ", " + y + (fmod ? " {fmod}" : "") + " : " + g.type(x) +
                    ", " + g.type(y),
                {3, 4}));
    cases.push_back(g.done(fmod ? "mod fmod" : "mod"));
  }
  return cases;
}

/// Ops along an axis and padding: top_k, cumsum, segment_reduce (also
/// over a gathered, row-sparse table, as nn.EmbeddingBag imports), pad,
/// and conv_grad_input used as a forward op (ConvTranspose).
std::vector<GradCase> axisCases() {
  std::vector<GradCase> cases;
  uint64_t seed = 2200;
  for (bool largest : {true, false}) {
    Graph g(seed++);
    Shape s{3, 5};
    std::string x = g.var("x", s, g.distinct(s, -1, 1));
    auto r = g.ops("px.top_k " + x + " {axis = 1 : i64, k = 2 : i64, largest = " +
                       (largest ? "true" : "false") + "} : " + g.type(x),
                   {{{3, 2}, "f64"}, {{3, 2}, "i64"}});
    g.loss(r[0]);
    cases.push_back(g.done(largest ? "top_k largest" : "top_k smallest"));
  }
  for (std::string flags : {"", ", exclusive", ", reverse", ", exclusive, reverse"}) {
    Graph g(seed++);
    std::string x = g.var("x", {3, 4}, -1, 1);
    g.loss(g.op("px.cumsum " + x + " {axis = 1 : i64" + flags + "} : " + g.type(x), {3, 4}));
    cases.push_back(g.done("cumsum" + flags));
  }
  for (const char *mode : {"sum", "mean", "max"}) {
    Graph g(seed++);
    Shape s{7, 3};
    std::string x = g.var("x", s, g.distinct(s, -1, 1));
    std::string st = g.indices({4}, {0, 2, 2, 5}), en = g.indices({4}, {2, 6, 2, 7});
    g.loss(g.op("px.segment_reduce " + x + ", " + st + ", " + en + " {mode = \"" + mode +
                    "\"} : " + g.type(x) + ", " + g.type(st) + ", " + g.type(en),
                {4, 3}));
    cases.push_back(g.done(std::string("segment_reduce ") + mode));
  }
  {
    // nn.EmbeddingBag: the rows of a table at the ids, reduced per bag;
    // the table stays read only through gather (a sparse gradient).
    Graph g(seed++);
    std::string table = g.var("table", {6, 3}, -1, 1);
    std::string ids = g.indices({7}, {4, 1, 4, 0, 5, 2, 1});
    std::string rows = gather(g, table, ids, 0);
    std::string st = g.indices({3}, {0, 3, 3}), en = g.indices({3}, {3, 3, 7});
    g.loss(g.op("px.segment_reduce " + rows + ", " + st + ", " + en +
                    " {mode = \"mean\"} : " + g.type(rows) + ", " + g.type(st) + ", " +
                    g.type(en),
                {3, 3}));
    cases.push_back(g.done("segment_reduce mean of gathered rows (sparse table)"));
  }
  struct P {
    Shape x;
    std::vector<int64_t> pads;
    const char *mode;
  };
  const P ps[] = {{{2, 3, 4}, {0, 1, 2, 0, 2, 1}, "constant"},
                  {{1, 2, 4, 4}, {0, 0, 1, 1, 0, 0, 1, 1}, "constant"},
                  {{3, 5}, {1, 2, 2, 3}, "reflect"},
                  {{3, 5}, {2, 0, 1, 4}, "edge"},
                  {{4, 6}, {-1, 1, 0, -2}, "constant"}};
  for (const P &p : ps) {
    Graph g(seed++);
    std::string x = g.var("x", p.x, -1, 1);
    Shape out(p.x.size());
    for (size_t d = 0; d < p.x.size(); ++d)
      out[d] = p.x[d] + p.pads[d] + p.pads[p.x.size() + d];
    g.loss(g.op("px.pad " + x + " {mode = \"" + p.mode + "\", pads = " + arr(p.pads) +
                    ", value = 5.000000e-01 : f64} : " + g.type(x),
                out));
    cases.push_back(g.done(std::string("pad ") + p.mode + " " + arr(p.pads)));
  }
  {
    // ScatterND / ScatterElements import as these scatters of the updates.
    Graph g(seed++);
    std::string u = g.var("u", {3, 4}, -1, 1);
    std::string i = g.indices({3}, {4, 0, 4});
    g.loss(g.op("px.scatter_add " + u + " at " + i + " {axis = 0 : i64} : " + g.type(u) +
                    ", " + g.type(i) + " -> " + tensorType({5, 4}, "f64"),
                {5, 4}));
    cases.push_back(g.done("scatter_add as a forward op (repeated row)"));
  }
  {
    Graph g(seed++);
    std::string u = g.var("u", {2, 3}, -1, 1);
    std::string i = g.indices({2, 3}, {1, 0, 3, 3, 2, 1});
    g.loss(g.op("px.scatter_elements_add " + u + " at " + i + " {axis = 1 : i64} : " +
                    g.type(u) + ", " + g.type(i) + " -> " + tensorType({2, 4}, "f64"),
                {2, 4}));
    cases.push_back(g.done("scatter_elements_add as a forward op"));
  }
  {
    // ConvTranspose: px.conv_grad_input as a forward op, x and w trained.
    Graph g(seed++);
    std::string x = g.var("x", {2, 4, 3, 3}, -1, 1);
    std::string w = g.var("w", {4, 3, 3, 3}, -0.5, 0.5);
    g.loss(g.op("px.conv_grad_input " + x + ", " + w +
                    " {dilations = array<i64: 1, 1>, pads = array<i64: 1, 0, 0, 1>, "
                    "strides = array<i64: 2, 2>} : " + g.type(x) + ", " + g.type(w) +
                    " -> " + tensorType({2, 3, 6, 6}, "f64"),
                {2, 3, 6, 6}));
    cases.push_back(g.done("conv_grad_input as ConvTranspose (stride 2, output padding)"));
  }
  {
    Graph g(seed++);
    std::string x = g.var("x", {1, 4, 5}, -1, 1);
    std::string w = g.var("w", {4, 1, 3}, -0.5, 0.5);
    g.loss(g.op("px.conv_grad_input " + x + ", " + w +
                    " {dilations = array<i64: 2>, group = 2 : i64, pads = array<i64: 1, 1>, "
                    "strides = array<i64: 1>} : " + g.type(x) + ", " + g.type(w) + " -> " +
                    tensorType({1, 2, 7}, "f64"),
                {1, 2, 7}));
    cases.push_back(g.done("conv_grad_input as ConvTranspose (1-D, group 2, dilation 2)"));
  }
  return cases;
}

std::vector<GradCase> dataMovementCases() {
  std::vector<GradCase> cases;
  uint64_t seed = 1700;
  auto reshape = [](Graph &g, const std::string &x, Shape to) {
    return g.op("px.reshape " + x + " : " + g.type(x) + " -> " +
                    tensorType(to, "f64"),
                to);
  };
  auto transpose = [](Graph &g, const std::string &x, std::vector<int64_t> perm) {
    Shape s = g.shape(x), out;
    for (int64_t p : perm)
      out.push_back(s[p]);
    return g.op("px.transpose " + x + " {perm = " + arr(perm) + "} : " + g.type(x),
                out);
  };
  auto concat = [](Graph &g, std::vector<std::string> xs, int64_t axis) {
    Shape out = g.shape(xs[0]);
    int64_t a = axis < 0 ? axis + (int64_t)out.size() : axis;
    out[a] = 0;
    std::string names, types;
    for (size_t i = 0; i < xs.size(); ++i) {
      out[a] += g.shape(xs[i])[a];
      names += (i ? ", " : "") + xs[i];
      types += (i ? ", " : "") + g.type(xs[i]);
    }
    return g.op("px.concat " + names + " {axis = " + std::to_string(axis) +
                    " : i64} : " + types,
                out);
  };
  auto expand = [](Graph &g, const std::string &x, Shape to) {
    return g.op("px.expand " + x + " : " + g.type(x) + " -> " +
                    tensorType(to, "f64"),
                to);
  };
  {
    Graph g(seed++);
    std::string x = g.var("x", {2, 6}, -1, 1);
    g.loss(g.unary("tanh", reshape(g, x, {3, 2, 2})));
    cases.push_back(g.done("reshape 2x6 -> 3x2x2"));
  }
  {
    Graph g(seed++);
    std::string x = g.var("x", {2, 3, 4}, -1, 1);
    g.loss(reshape(g, x, {24}));
    g.loss(reshape(g, x, {1, 6, 1, 4}));
    cases.push_back(g.done("reshape to 24 and 1x6x1x4"));
  }
  {
    Graph g(seed++);
    std::string x = g.var("x", {2, 3, 4}, -1, 1);
    g.loss(transpose(g, x, {2, 0, 1}));
    cases.push_back(g.done("transpose perm 2, 0, 1"));
  }
  {
    Graph g(seed++);
    std::string x = g.var("x", {3, 4}, -1, 1);
    g.loss(g.unary("sigmoid", transpose(g, x, {1, 0})));
    cases.push_back(g.done("transpose 2-D"));
  }
  {
    Graph g(seed++);
    std::string a = g.var("a", {2, 3}, -1, 1), b = g.var("b", {2, 5}, -1, 1);
    g.loss(concat(g, {a, b, a}, 1));
    cases.push_back(g.done("concat a, b, a axis 1"));
  }
  {
    Graph g(seed++);
    std::string a = g.var("a", {2, 1, 3}, -1, 1), b = g.var("b", {2, 2, 3}, -1, 1);
    std::string c = g.constant({2, 1, 3}, g.uniform({2, 1, 3}, -1, 1));
    g.loss(concat(g, {a, c, b}, -2));
    cases.push_back(g.done("concat with a constant, axis -2"));
  }
  {
    Graph g(seed++);
    std::string x = g.var("x", {3, 1}, -1, 1);
    g.loss(expand(g, x, {2, 3, 4}));
    cases.push_back(g.done("expand 3x1 -> 2x3x4"));
  }
  {
    Graph g(seed++);
    std::string x = g.var("x", {}, {0.4});
    std::string y = g.var("y", {1, 4}, -1, 1);
    g.loss(expand(g, x, {3}));
    g.loss(expand(g, y, {3, 4}));
    cases.push_back(g.done("expand scalar -> 3, 1x4 -> 3x4"));
  }
  return cases;
}

std::vector<GradCase> convCases() {
  std::vector<GradCase> cases;
  uint64_t seed = 1800;
  {
    Graph g(seed++);
    std::string x = g.var("x", {2, 3, 5, 5}, -1, 1);
    std::string w = g.var("w", {4, 3, 3, 3}, -0.5, 0.5);
    std::string b = g.var("b", {4}, -1, 1);
    g.loss(conv(g, x, w, b, {1, 1}, {1, 1, 1, 1}, {1, 1}));
    cases.push_back(g.done("conv 2-D pads 1, bias"));
  }
  {
    Graph g(seed++);
    std::string x = g.var("x", {1, 2, 6, 5}, -1, 1);
    std::string w = g.var("w", {3, 2, 3, 2}, -0.5, 0.5);
    g.loss(conv(g, x, w, "", {2, 2}, {0, 1, 1, 0}, {1, 1}));
    cases.push_back(g.done("conv 2-D stride 2, asymmetric pads, no bias"));
  }
  {
    Graph g(seed++);
    std::string x = g.var("x", {1, 2, 7, 7}, -1, 1);
    std::string w = g.var("w", {2, 2, 3, 3}, -0.5, 0.5);
    std::string b = g.var("b", {2}, -1, 1);
    g.loss(conv(g, x, w, b, {1, 1}, {0, 0, 0, 0}, {2, 2}));
    cases.push_back(g.done("conv 2-D dilation 2"));
  }
  {
    Graph g(seed++);
    std::string x = g.var("x", {2, 4, 5, 5}, -1, 1);
    std::string w = g.var("w", {6, 2, 3, 3}, -0.5, 0.5);
    std::string b = g.var("b", {6}, -1, 1);
    g.loss(conv(g, x, w, b, {2, 1}, {1, 0, 1, 2}, {1, 2}, 2));
    cases.push_back(g.done("conv 2-D group 2, strides 2x1, pads, dilations 1x2"));
  }
  {
    Graph g(seed++);
    std::string x = g.var("x", {1, 3, 5, 5}, -1, 1);
    std::string w = g.var("w", {3, 1, 3, 3}, -0.5, 0.5);
    g.loss(conv(g, x, w, "", {1, 1}, {1, 1, 1, 1}, {1, 1}, 3));
    cases.push_back(g.done("conv 2-D depthwise (group 3)"));
  }
  {
    Graph g(seed++);
    std::string x = g.var("x", {2, 3, 7}, -1, 1);
    std::string w = g.var("w", {4, 3, 3}, -0.5, 0.5);
    std::string b = g.var("b", {4}, -1, 1);
    g.loss(conv(g, x, w, b, {2}, {1, 1}, {1}));
    cases.push_back(g.done("conv 1-D stride 2, pads 1, bias"));
  }
  {
    Graph g(seed++);
    std::string x = g.var("x", {1, 4, 9}, -1, 1);
    std::string w = g.var("w", {2, 2, 3}, -0.5, 0.5);
    g.loss(conv(g, x, w, "", {1}, {2, 0}, {2}, 2));
    cases.push_back(g.done("conv 1-D dilation 2, group 2, pads 2, 0"));
  }
  {
    Graph g(seed++);
    std::string x = g.var("x", {1, 2, 4, 4}, -1, 1);
    std::string w = g.constant({3, 2, 2, 2}, g.uniform({3, 2, 2, 2}, -0.5, 0.5));
    g.loss(conv(g, x, w, "", {1, 1}, {0, 0, 0, 0}, {1, 1}));
    cases.push_back(g.done("conv x only (constant w)"));
  }
  {
    Graph g(seed++);
    std::string x = g.constant({2, 2, 4, 4}, g.uniform({2, 2, 4, 4}, -1, 1));
    std::string w = g.var("w", {3, 2, 2, 2}, -0.5, 0.5);
    g.loss(conv(g, x, w, "", {2, 2}, {1, 1, 0, 0}, {1, 1}));
    cases.push_back(g.done("conv w only (constant x)"));
  }
  return cases;
}

std::vector<GradCase> poolCases() {
  std::vector<GradCase> cases;
  uint64_t seed = 1900;
  struct MP {
    Shape x;
    std::vector<int64_t> kernel, strides, pads, dilations;
    bool ceil;
    const char *what;
  };
  const MP mps[] = {
      {{1, 2, 4, 4}, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}, false, "2x2 stride 2"},
      {{1, 2, 5, 5}, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}, true, "2x2 stride 2 ceil_mode"},
      {{1, 2, 5, 5}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, false, "3x3 stride 1 pads 1 (overlapping)"},
      {{2, 1, 5, 5}, {2, 2}, {1, 1}, {0, 0, 0, 0}, {2, 2}, false, "2x2 dilation 2"},
      {{1, 2, 6, 5}, {3, 2}, {2, 2}, {1, 0, 0, 1}, {1, 1}, true, "3x2 asymmetric pads ceil_mode"},
      {{2, 3, 8}, {3}, {2}, {1, 0}, {1}, true, "1-D kernel 3 stride 2 ceil_mode"},
  };
  for (const MP &m : mps) {
    Graph g(seed++);
    std::string x = g.var("x", m.x, g.distinct(m.x, -1, 1));
    g.loss(maxPool(g, x, m.kernel, m.strides, m.pads, m.dilations, m.ceil));
    cases.push_back(g.done(std::string("max_pool ") + m.what));
  }
  struct AP {
    Shape x;
    std::vector<int64_t> kernel, strides, pads;
    bool ceil;
    const char *what;
  };
  const AP aps[] = {
      {{1, 2, 5, 5}, {3, 3}, {2, 2}, {1, 1, 1, 1}, false, "3x3 stride 2 pads 1"},
      {{1, 2, 4, 4}, {2, 2}, {1, 1}, {0, 0, 0, 0}, false, "2x2 stride 1"},
      {{1, 1, 5, 5}, {2, 2}, {2, 2}, {0, 0, 0, 0}, true, "2x2 stride 2 ceil_mode (partial windows)"},
      {{1, 2, 6, 6}, {3, 3}, {2, 2}, {0, 0, 1, 1}, true, "3x3 stride 2 end pads ceil_mode"},
      {{2, 2, 7}, {3}, {2}, {1, 1}, false, "1-D kernel 3 stride 2 pads 1"},
      {{1, 2, 6}, {4}, {3}, {2, 1}, true, "1-D kernel 4 stride 3 pads 2, 1 ceil_mode"},
  };
  for (bool countPad : {true, false})
    for (const AP &a : aps) {
      Graph g(seed++);
      std::string x = g.var("x", a.x, -1, 1);
      g.loss(avgPool(g, x, a.kernel, a.strides, a.pads, a.ceil, countPad));
      cases.push_back(g.done(std::string("avg_pool ") + a.what +
                             (countPad ? ", count_include_pad" : ", pads not counted")));
    }
  return cases;
}

std::vector<GradCase> compositeCases() {
  std::vector<GradCase> cases;
  uint64_t seed = 2000;
  {
    // A two-layer MLP with softmax cross entropy (PyTorch's Linear = gemm
    // transB), every weight used once.
    Graph g(seed++);
    std::string x = g.constant({4, 3}, g.uniform({4, 3}, -1, 1));
    std::string w1 = g.var("w1", {5, 3}, -1, 1), b1 = g.var("b1", {5}, -0.5, 0.5);
    std::string w2 = g.var("w2", {3, 5}, -1, 1), b2 = g.var("b2", {3}, -0.5, 0.5);
    std::string h = g.unary("tanh", gemm(g, x, w1, b1, false, true, 1, 1));
    std::string logits = gemm(g, h, w2, b2, false, true, 1, 1);
    std::string labels = g.indices({4}, {0, 2, 1, 2});
    g.loss(sce(g, logits, labels, "", "", std::nullopt)[0]);
    cases.push_back(g.done("MLP: gemm, tanh, gemm, softmax_cross_entropy_loss"));
  }
  {
    // One variable feeding several ops: the contributions are summed.
    Graph g(seed++);
    std::string w = g.var("w", {3, 3}, -1, 1);
    std::string y = matmul(g, w, w);
    std::string z = g.binary("mul", g.unary("sigmoid", y), w);
    g.loss(z);
    g.loss(reduce(g, "reduce_mean", w, {0}, false));
    cases.push_back(g.done("shared variable: matmul w w, mul, reduce_mean"));
  }
  {
    // Attention: softmax(q k^T / 2) v with batched matmuls and transposes.
    Graph g(seed++);
    std::string q = g.var("q", {2, 3, 4}, -1, 1), k = g.var("k", {2, 3, 4}, -1, 1);
    std::string v = g.var("v", {2, 3, 4}, -1, 1);
    std::string kt = g.op("px.transpose " + k + " {perm = array<i64: 0, 2, 1>} : " +
                              g.type(k),
                          {2, 4, 3});
    std::string s = matmul(g, q, kt);
    std::string scaled = g.binary("mul", s, g.constant({}, {0.5}));
    std::string p = g.unary("softmax", scaled, "{axis = -1 : i64}");
    g.loss(matmul(g, p, v));
    cases.push_back(g.done("attention: matmul, transpose, softmax, matmul"));
  }
  {
    // A small CNN: conv, batch_norm, relu, max_pool, reshape, gemm,
    // log_softmax, nll_loss. relu's inputs are whatever batch_norm gives,
    // so it runs on a grid unlikely to put any within 1e-6 of 0.
    Graph g(seed++);
    std::string x = g.constant({2, 1, 4, 4}, g.uniform({2, 1, 4, 4}, -1, 1));
    std::string w = g.var("w", {2, 1, 3, 3}, -0.5, 0.5);
    std::string b = g.var("b", {2}, -0.2, 0.2);
    std::string c = conv(g, x, w, b, {1, 1}, {1, 1, 1, 1}, {1, 1});
    std::string gamma = g.var("gamma", {2}, 0.5, 1.5), beta = g.var("beta", {2}, -0.5, 0.5);
    std::string m = g.var("bn_mean", {2}, {0, 0}, false);
    std::string v = g.var("bn_var", {2}, {1, 1}, false);
    auto bn = g.ops("px.batch_norm " + c + ", " + gamma + ", " + beta + ", " + m +
                        ", " + v + " {training} : " + g.type(c) + ", " + g.type(gamma),
                    {{g.shape(c), "f64"}, {{2}, "f64"}, {{2}, "f64"}});
    std::string r = g.unary("tanh", bn[0]);
    std::string p = maxPool(g, r, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}, false);
    std::string flat = g.op("px.reshape " + p + " : " + g.type(p) + " -> " +
                                tensorType({2, 8}, "f64"),
                            {2, 8});
    std::string fc = g.var("fc", {3, 8}, -0.5, 0.5);
    std::string logits = gemm(g, flat, fc, "", false, true, 1, 1);
    std::string logp = g.unary("log_softmax", logits, "{axis = 1 : i64}");
    std::string labels = g.indices({2}, {2, 0});
    g.loss(nll(g, logp, labels, "", "", std::nullopt));
    cases.push_back(g.done("CNN: conv, batch_norm, tanh, max_pool, gemm, log_softmax, nll_loss"));
  }
  {
    // Transformer-style block: layer_norm, gemm, erf-GELU, residual.
    Graph g(seed++);
    std::string x = g.var("x", {3, 4}, -1, 1);
    std::string s = g.var("ln_scale", {4}, 0.5, 1.5), bi = g.var("ln_bias", {4}, -0.5, 0.5);
    auto ln = g.ops("px.layer_norm " + x + ", " + s + ", " + bi + " : " + g.type(x) +
                        ", " + g.type(s) + ", " + g.type(bi),
                    {{{3, 4}, "f64"}, {{3, 1}, "f64"}, {{3, 1}, "f64"}});
    std::string w = g.var("w", {4, 4}, -0.5, 0.5);
    std::string hid = gemm(g, ln[0], w, "", false, false, 1, 1);
    std::string half = g.constant({}, {0.5});
    std::string gelu = g.binary(
        "mul", g.binary("mul", hid, half),
        g.binary("add", g.constant({}, {1.0}),
                 g.unary("erf", g.binary("mul", hid, g.constant({}, {M_SQRT1_2})))));
    g.loss(g.binary("add", x, gelu));
    cases.push_back(g.done("block: layer_norm, gemm, erf GELU, residual"));
  }
  return cases;
}

//===----------------------------------------------------------------------===//
// Recurrent layers: px.lstm / px.gru through px.lstm_grad / px.gru_grad.
//===----------------------------------------------------------------------===//

struct RecurrentLayer {
  std::vector<std::string> results; // y, y_h, [y_c,] gates[, cells]
};

/// A px.lstm (or px.gru) over `x` [T, B, I] with fresh trainable weights;
/// `bias`, `h0`, `c0` are operands as given, zeros when "" (what the
/// importer passes for absent ones).
RecurrentLayer recurrent(Graph &g, bool lstm, const std::string &x,
                         const std::string &tag, int64_t hidden,
                         const std::string &direction, std::string bias,
                         std::string h0, std::string c0, bool lbr = true) {
  const Shape &xs = g.shape(x);
  int64_t t = xs[0], b = xs[1], i = xs[2], d = direction == "bidirectional" ? 2 : 1;
  int64_t rows = (lstm ? 4 : 3) * hidden;
  std::string w = g.var("w" + tag, {d, rows, i}, -0.8, 0.8);
  std::string r = g.var("r" + tag, {d, rows, hidden}, -0.8, 0.8);
  auto zeros = [&](const Shape &s) {
    return g.constant(s, std::vector<double>(numel(s), 0.0));
  };
  if (bias.empty())
    bias = zeros({d, 2 * rows});
  if (h0.empty())
    h0 = zeros({d, b, hidden});
  if (lstm && c0.empty())
    c0 = zeros({d, b, hidden});
  std::vector<std::string> operands{x, w, r, bias, h0};
  if (lstm)
    operands.push_back(c0);
  std::string text = lstm ? "px.lstm " : "px.gru ", types;
  for (size_t k = 0; k < operands.size(); ++k) {
    text += (k ? ", " : "") + operands[k];
    types += (k ? ", " : "") + g.type(operands[k]);
  }
  std::vector<std::string> attrs;
  if (direction != "forward")
    attrs.push_back("direction = \"" + direction + "\"");
  if (!lstm && lbr)
    attrs.push_back("linear_before_reset");
  if (!attrs.empty()) {
    text += " {" + attrs[0];
    for (size_t k = 1; k < attrs.size(); ++k)
      text += ", " + attrs[k];
    text += "}";
  }
  text += " : " + types;
  std::vector<std::pair<Shape, std::string>> resultTypes{
      {{t, d, b, hidden}, "f64"}, {{d, b, hidden}, "f64"}};
  if (lstm)
    resultTypes.push_back({{d, b, hidden}, "f64"});
  resultTypes.push_back({{d, t, b, 4 * hidden}, "f64"});
  if (lstm)
    resultTypes.push_back({{d, t, b, hidden}, "f64"});
  return {g.ops(text, resultTypes)};
}

std::vector<GradCase> recurrentCases() {
  std::vector<GradCase> cases;
  uint64_t seed = 2500;
  const int64_t T = 3, B = 2, I = 3, H = 2;
  for (bool lstm : {true, false}) {
    const char *name = lstm ? "lstm" : "gru";
    {
      // Every operand trainable, every result in the loss.
      Graph g(seed++);
      std::string x = g.var("x", {T, B, I}, -1, 1);
      std::string b = g.var("b", {1, (lstm ? 8 : 6) * H}, -0.5, 0.5);
      std::string h0 = g.var("h0", {1, B, H}, -0.7, 0.7);
      std::string c0 = lstm ? g.var("c0", {1, B, H}, -0.7, 0.7) : "";
      auto l = recurrent(g, lstm, x, "", H, "forward", b, h0, c0);
      for (int k = 0; k < (lstm ? 3 : 2); ++k)
        g.loss(l.results[k]);
      cases.push_back(g.done(std::string(name) + " forward, bias and initial states, "
                                                 "loss on every output"));
    }
    {
      // Bidirectional, no bias or initial states, loss on y only.
      Graph g(seed++);
      std::string x = g.var("x", {T, B, I}, -1, 1);
      auto l = recurrent(g, lstm, x, "", H, "bidirectional", "", "", "");
      g.loss(l.results[0]);
      cases.push_back(g.done(std::string(name) + " bidirectional, loss on y"));
    }
    {
      // Reverse with an initial state, loss on the final state only (a
      // classifier on y_h; for LSTM also y_c).
      Graph g(seed++);
      std::string x = g.constant({T, B, I}, g.uniform({T, B, I}, -1, 1));
      std::string h0 = g.var("h0", {1, B, H}, -0.7, 0.7);
      auto l = recurrent(g, lstm, x, "", H, "reverse", "", h0, "", /*lbr=*/false);
      g.loss(l.results[lstm ? 2 : 1]);
      cases.push_back(g.done(std::string(name) + " reverse, constant x, loss on " +
                             (lstm ? "y_c" : "y_h") +
                             (lstm ? "" : ", linear_before_reset = 0")));
    }
  }
  {
    // Two stacked layers as torch exports nn.LSTM(num_layers=2): layer 1
    // reads layer 0's y [T, 1, B, H] reshaped to [T, B, H].
    Graph g(seed++);
    std::string x = g.var("x", {T, B, I}, -1, 1);
    auto l0 = recurrent(g, true, x, "0", H, "forward", g.var("b0", {1, 8 * H}, -0.5, 0.5),
                        "", "");
    std::string y0 = g.op("px.reshape " + l0.results[0] + " : " + g.type(l0.results[0]) +
                              " -> " + tensorType({T, B, H}, "f64"),
                          {T, B, H});
    auto l1 = recurrent(g, true, y0, "1", H, "forward", g.var("b1", {1, 8 * H}, -0.5, 0.5),
                        "", "");
    g.loss(l1.results[0]);
    cases.push_back(g.done("two stacked lstm layers"));
  }
  {
    // Bidirectional GRU without linear_before_reset, every operand.
    Graph g(seed++);
    std::string x = g.var("x", {T, B, I}, -1, 1);
    std::string b = g.var("b", {2, 6 * H}, -0.5, 0.5);
    std::string h0 = g.var("h0", {2, B, H}, -0.7, 0.7);
    auto l = recurrent(g, false, x, "", H, "bidirectional", b, h0, "", /*lbr=*/false);
    g.loss(l.results[0]);
    g.loss(l.results[1]);
    cases.push_back(g.done("gru bidirectional, linear_before_reset = 0, every operand"));
  }
  return cases;
}

std::vector<GradCase> simpleRnnCases() {
  std::vector<GradCase> cases;
  uint64_t seed = 3000;
  const int64_t T = 3, B = 2, I = 3, H = 2;
  struct SR {
    const char *direction, *activation;
    bool states, lossOnState;
  };
  const SR srs[] = {{"forward", "tanh", true, false},
                    {"bidirectional", "relu", false, false},
                    {"reverse", "tanh", true, true},
                    {"bidirectional", "tanh", true, true}};
  for (const SR &c : srs) {
    Graph g(seed++);
    int64_t d = std::string(c.direction) == "bidirectional" ? 2 : 1;
    std::string x = g.var("x", {T, B, I}, -1, 1);
    std::string w = g.var("w", {d, H, I}, -0.8, 0.8);
    std::string r = g.var("r", {d, H, H}, -0.8, 0.8);
    std::string b = c.states ? g.var("b", {d, 2 * H}, -0.5, 0.5)
                             : g.constant({d, 2 * H}, std::vector<double>(d * 2 * H, 0.1));
    std::string h0 = c.states ? g.var("h0", {d, B, H}, -0.7, 0.7)
                              : g.constant({d, B, H}, std::vector<double>(d * B * H, 0.0));
    std::string attrs = std::string("{activation = \"") + c.activation + "\", direction = \"" +
                        c.direction + "\"}";
    auto res = g.ops("px.rnn " + x + ", " + w + ", " + r + ", " + b + ", " + h0 + " " + attrs +
                         " : " + g.type(x) + ", " + g.type(w) + ", " + g.type(r) + ", " +
                         g.type(b) + ", " + g.type(h0),
                     {{{T, d, B, H}, "f64"}, {{d, B, H}, "f64"}});
    g.loss(c.lossOnState ? res[1] : res[0]);
    if (!c.lossOnState && c.states)
      g.loss(res[1]);
    cases.push_back(g.done(std::string("rnn ") + c.activation + " " + c.direction +
                           (c.states ? ", bias and initial state" : "") +
                           (c.lossOnState ? ", loss on y_h" : "")));
  }
  return cases;
}

struct Family {
  const char *name;
  std::vector<GradCase> (*cases)();
};

const Family kFamilies[] = {
    {"arithmetic", arithmeticCases}, {"pow", powCases},
    {"maxmin", maxMinCases},         {"where", whereCases},
    {"unary", unaryCases},           {"cast", castCases},
    {"gather", gatherCases},         {"slice", sliceCases},
    {"matmul", matmulCases},         {"gemm", gemmCases},
    {"softmax", softmaxCases},       {"loss", lossCases},
    {"layer_norm", layerNormCases},  {"batch_norm", batchNormCases},
    {"dropout", dropoutCases},       {"reduction", reductionCases},
    {"data_movement", dataMovementCases}, {"conv", convCases},
    {"pool", poolCases},             {"composite", compositeCases},
    {"recurrent", recurrentCases},
    {"function", functionCases},     {"axis", axisCases},
    {"rnn", simpleRnnCases},
};

//===----------------------------------------------------------------------===//
// Tests.
//===----------------------------------------------------------------------===//

TEST(GradientCheck, Arithmetic) { runCases(arithmeticCases()); }
TEST(GradientCheck, Pow) { runCases(powCases()); }
TEST(GradientCheck, MaxMin) { runCases(maxMinCases()); }
TEST(GradientCheck, Where) { runCases(whereCases()); }
TEST(GradientCheck, Unary) { runCases(unaryCases()); }
TEST(GradientCheck, Cast) { runCases(castCases()); }
TEST(GradientCheck, Gather) { runCases(gatherCases()); }
TEST(GradientCheck, Slice) { runCases(sliceCases()); }
TEST(GradientCheck, MatMul) { runCases(matmulCases()); }
TEST(GradientCheck, Gemm) { runCases(gemmCases()); }
TEST(GradientCheck, Softmax) { runCases(softmaxCases()); }
TEST(GradientCheck, Losses) { runCases(lossCases()); }
TEST(GradientCheck, LayerNorm) { runCases(layerNormCases()); }
TEST(GradientCheck, BatchNorm) { runCases(batchNormCases()); }
TEST(GradientCheck, Dropout) { runCases(dropoutCases()); }
TEST(GradientCheck, Reductions) { runCases(reductionCases()); }
TEST(GradientCheck, DataMovement) { runCases(dataMovementCases()); }
TEST(GradientCheck, Conv) { runCases(convCases()); }
TEST(GradientCheck, Pooling) { runCases(poolCases()); }
TEST(GradientCheck, Composite) { runCases(compositeCases()); }
TEST(GradientCheck, Recurrent) { runCases(recurrentCases()); }
TEST(GradientCheck, Functions) { runCases(functionCases()); }
TEST(GradientCheck, AxisOpsAndPadding) { runCases(axisCases()); }
TEST(GradientCheck, SimpleRnn) { runCases(simpleRnnCases()); }

// The harness itself: a mismatch must be reported, not averaged away.
TEST(GradientCheckHarness, DetectsAPerturbedGradient) {
  Compiler c;
  Graph g(1);
  std::string x = g.var("x", {2, 3}, -2, 2);
  g.loss(g.unary("tanh", x));
  std::string ir = g.ir();
  Gradients a = analyticGradients(c, ir), n = numericGradients(c, ir, 1e-6);
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(n.size(), 1u);
  EXPECT_TRUE(gradientsAgree("tanh", a, n, Tolerance{}));

  // One element off by 1e-4 (1 + |g|): ten times the tolerance.
  Gradients perturbed = n;
  perturbed[0].values[4] += 1e-4 * (1.0 + std::fabs(perturbed[0].values[4]));
  testing::AssertionResult r = gradientsAgree("tanh", a, perturbed, Tolerance{});
  EXPECT_FALSE(r);
  EXPECT_NE(std::string(r.message()).find("variable 'x' element 4[1, 1]"),
            std::string::npos)
      << r.message();
  EXPECT_NE(std::string(r.message()).find("1 of 6 elements differ"),
            std::string::npos)
      << r.message();

  // A sign error, a NaN, and a variable with no analytic gradient.
  perturbed = n;
  perturbed[0].values[0] = -perturbed[0].values[0];
  EXPECT_FALSE(gradientsAgree("tanh", a, perturbed, Tolerance{}));
  perturbed = n;
  perturbed[0].values[2] = std::nan("");
  EXPECT_FALSE(gradientsAgree("tanh", a, perturbed, Tolerance{}));
  EXPECT_FALSE(gradientsAgree("tanh", Gradients{}, n, Tolerance{}));
  // A difference within the tolerance passes.
  perturbed = n;
  perturbed[0].values[3] += 1e-7;
  EXPECT_TRUE(gradientsAgree("tanh", a, perturbed, Tolerance{}));
}

// Every op px-autodiff has a rule for (the TypeSwitch in Autodiff.cpp) must
// appear in some case, so that a new rule cannot land unchecked.
TEST(GradientCheckHarness, CoversEveryDifferentiatedOp) {
  const std::map<std::string, std::string> mnemonic = {
      {"AddOp", "add"}, {"SubOp", "sub"}, {"MulOp", "mul"}, {"DivOp", "div"},
      {"PowOp", "pow"}, {"MaxOp", "max"}, {"MinOp", "min"}, {"WhereOp", "where"},
      {"NegOp", "neg"}, {"AbsOp", "abs"}, {"SqrtOp", "sqrt"},
      {"ReciprocalOp", "reciprocal"}, {"ExpOp", "exp"}, {"LogOp", "log"},
      {"ReluOp", "relu"}, {"LeakyReluOp", "leaky_relu"}, {"TanhOp", "tanh"},
      {"SigmoidOp", "sigmoid"}, {"ErfOp", "erf"}, {"ClipOp", "clip"},
      {"CastOp", "cast"}, {"GatherOp", "gather"},
      {"GatherElementsOp", "gather_elements"}, {"SliceOp", "slice"},
      {"MatMulOp", "matmul"}, {"GemmOp", "gemm"}, {"SoftmaxOp", "softmax"},
      {"LogSoftmaxOp", "log_softmax"},
      {"SoftmaxCrossEntropyLossOp", "softmax_cross_entropy_loss"},
      {"NegativeLogLikelihoodLossOp", "nll_loss"}, {"LayerNormOp", "layer_norm"},
      {"BatchNormOp", "batch_norm"}, {"DropoutOp", "dropout"},
      {"ReduceSumOp", "reduce_sum"}, {"ReduceMeanOp", "reduce_mean"},
      {"ReduceMaxOp", "reduce_max"}, {"ReshapeOp", "reshape"},
      {"TransposeOp", "transpose"}, {"ConcatOp", "concat"}, {"ExpandOp", "expand"},
      {"ConvOp", "conv"}, {"MaxPoolOp", "max_pool"}, {"AveragePoolOp", "avg_pool"},
      {"LstmOp", "lstm"}, {"GruOp", "gru"},
      {"SinOp", "sin"}, {"CosOp", "cos"}, {"TanOp", "tan"}, {"AsinOp", "asin"},
      {"AcosOp", "acos"}, {"AtanOp", "atan"}, {"SinhOp", "sinh"}, {"CoshOp", "cosh"},
      {"AsinhOp", "asinh"}, {"AcoshOp", "acosh"}, {"AtanhOp", "atanh"},
      {"FloorOp", "floor"}, {"CeilOp", "ceil"}, {"RoundOp", "round"}, {"SignOp", "sign"},
      {"ModOp", "mod"}, {"ReduceMinOp", "reduce_min"}, {"ReduceProdOp", "reduce_prod"},
      {"TopKOp", "top_k"}, {"CumSumOp", "cumsum"}, {"SegmentReduceOp", "segment_reduce"},
      {"PadOp", "pad"}, {"ConvGradInputOp", "conv_grad_input"},
      {"ScatterAddOp", "scatter_add"}, {"ScatterElementsAddOp", "scatter_elements_add"},
      {"RnnOp", "rnn"},
  };
  std::ifstream in(PARALLAX_SOURCE_DIR "/lib/Transforms/Autodiff.cpp");
  ASSERT_TRUE(in) << "cannot read Autodiff.cpp";
  std::stringstream src;
  src << in.rdbuf();
  std::string text = src.str();
  std::set<std::string> ruled;
  const std::string marker = ".Case([&](px::";
  for (size_t at = text.find(marker); at != std::string::npos;
       at = text.find(marker, at + 1)) {
    size_t begin = at + marker.size();
    size_t end = text.find_first_of(" )", begin);
    ruled.insert(text.substr(begin, end - begin));
  }
  EXPECT_GE(ruled.size(), mnemonic.size());

  std::string all;
  size_t count = 0;
  for (const Family &f : kFamilies)
    for (const GradCase &c : f.cases()) {
      all += c.ir;
      ++count;
    }
  for (const std::string &cls : ruled) {
    auto it = mnemonic.find(cls);
    if (it == mnemonic.end()) {
      ADD_FAILURE() << "px-autodiff has a rule for px::" << cls
                    << " that no gradient check covers (add a case and its "
                       "mnemonic here)";
      continue;
    }
    EXPECT_NE(all.find("= px." + it->second + " "), std::string::npos)
        << "no gradient check uses px." << it->second;
  }
  std::printf("%zu gradient-check cases over %zu differentiated ops\n", count,
              ruled.size());
}

} // namespace
