//===- ConvGeometry.cpp - window geometry of convolution and pooling ------===//

#include "ConvGeometry.h"
#include "KernelUtil.h"

#include <climits>
#include <string>

namespace parallax::rt::conv {

using detail::shapeStr;

void checkFloat(const KernelArgs &args, const TensorView &t, const char *what) {
  if (t.dtype == DType::F16 || t.dtype == DType::BF16)
    args.fail(std::string(what) + ": " + nameOf(t.dtype) +
              " is not supported by the CPU runtime");
  if (t.dtype != DType::F32 && t.dtype != DType::F64)
    args.fail(std::string(what) + " must be f32 or f64, got " +
              nameOf(t.dtype));
}

void checkSameDType(const KernelArgs &args, const TensorView &a,
                    const TensorView &b, const char *what) {
  if (a.dtype != b.dtype)
    args.fail(std::string(what) + " must be " + nameOf(a.dtype) + ", got " +
              nameOf(b.dtype));
}

Geo makeGeo(const KernelArgs &args, const std::vector<int64_t> &xShape,
            const std::vector<int64_t> &kernel, bool hasDilations,
            bool ceilMode, const std::vector<int64_t> &yShape,
            int64_t channels, const char *yWhat) {
  int64_t nd = (int64_t)xShape.size() - 2;
  if (nd < 1)
    args.fail("expected a tensor [N, C, spatial...], got " + shapeStr(xShape));
  if (nd > kMaxSpatial)
    args.fail("at most " + std::to_string(kMaxSpatial) +
              " spatial dimensions are supported, got " + std::to_string(nd));
  std::vector<int64_t> strides = args.i64s("strides");
  std::vector<int64_t> pads = args.i64s("pads");
  std::vector<int64_t> dil = hasDilations ? args.i64s("dilations")
                                          : std::vector<int64_t>(nd, 1);
  if ((int64_t)kernel.size() != nd)
    args.fail("expected " + std::to_string(nd) + " kernel dimensions, got " +
              std::to_string(kernel.size()));
  if ((int64_t)strides.size() != nd)
    args.fail("expected " + std::to_string(nd) + " strides, got " +
              std::to_string(strides.size()));
  if ((int64_t)dil.size() != nd)
    args.fail("expected " + std::to_string(nd) + " dilations, got " +
              std::to_string(dil.size()));
  if ((int64_t)pads.size() != 2 * nd)
    args.fail("expected " + std::to_string(2 * nd) +
              " pads (begins then ends), got " + std::to_string(pads.size()));
  for (int64_t i = 0; i < nd; ++i) {
    if (kernel[i] < 1 || strides[i] < 1 || dil[i] < 1)
      args.fail("kernel sizes, strides and dilations must be >= 1, got "
                "kernel " + shapeStr(kernel) + ", strides " +
                shapeStr(strides) + ", dilations " + shapeStr(dil));
    if (pads[i] < 0 || pads[nd + i] < 0)
      args.fail("pads must be >= 0, got " + shapeStr(pads));
  }
  // Below 2^31, as the px verifier requires, so that windowOutputSize's arithmetic
  // cannot overflow.
  for (const std::vector<int64_t> *list :
       std::initializer_list<const std::vector<int64_t> *>{&kernel, &strides, &pads, &dil})
    for (int64_t v : *list)
      if (v > INT32_MAX)
        args.fail("kernel sizes, strides, pads and dilations must be below 2^31, got "
                  "kernel " + shapeStr(kernel) + ", strides " + shapeStr(strides) +
                  ", pads " + shapeStr(pads) + ", dilations " + shapeStr(dil));
  for (int64_t d : xShape)
    if (d < 0)
      args.fail("negative dimension in " + shapeStr(xShape));
  Geo g = windowGeo(xShape, kernel, strides, pads, dil, ceilMode);
  std::vector<int64_t> expected{xShape[0], channels};
  for (int64_t i = 0; i < nd; ++i) {
    if (g.out[i] < 1)
      args.fail("window of size " + std::to_string(kernel[i]) +
                " (dilation " + std::to_string(dil[i]) +
                ") does not fit spatial dimension " + std::to_string(i) +
                " of size " + std::to_string(g.in[i]) + " with pads " +
                shapeStr(pads));
    expected.push_back(g.out[i]);
  }
  if (yShape != expected)
    args.fail(std::string(yWhat) + " must have shape " + shapeStr(expected) +
              ", got " + shapeStr(yShape));
  return g;
}

ConvShapes makeConvShapes(const KernelArgs &args, const std::vector<int64_t> &x,
                          const std::vector<int64_t> &w, const std::vector<int64_t> &y,
                          const char *yWhat) {
  ConvShapes cd;
  if (x.size() < 3 || w.size() != x.size() || y.size() != x.size())
    args.fail("conv needs x [N, C, spatial...], w and y of the same rank, "
              "got x " + shapeStr(x) + ", w " + shapeStr(w) + ", y " +
              shapeStr(y));
  cd.group = args.i64Or("group", 1);
  cd.n = x[0];
  cd.c = x[1];
  cd.m = w[0];
  if (cd.group < 1 || cd.c % cd.group != 0 || cd.m % cd.group != 0 ||
      w[1] * cd.group != cd.c)
    args.fail("channels do not match: x has " + std::to_string(cd.c) +
              ", w is " + shapeStr(w) + ", group " + std::to_string(cd.group));
  cd.cg = cd.c / cd.group;
  cd.mg = cd.m / cd.group;
  std::vector<int64_t> kernel(w.begin() + 2, w.end());
  cd.g = makeGeo(args, x, kernel, /*hasDilations=*/true, /*ceil=*/false, y,
                 cd.m, yWhat);
  cd.kc = cd.cg * cd.g.kSize;
  return cd;
}

ConvShapes readConvShapes(const KernelArgs &args, ConvKind kind) {
  switch (kind) {
  case ConvKind::Forward: {
    const TensorView &x = args.in(0), &w = args.in(1), &y = args.out(0);
    checkFloat(args, x, "x");
    checkSameDType(args, x, w, "w");
    checkSameDType(args, x, y, "y");
    if (args.hasIn(2)) {
      const TensorView &b = args.in(2);
      checkSameDType(args, x, b, "b");
      if (b.shape != std::vector<int64_t>{w.rank() > 0 ? w.dim(0) : 0})
        args.fail("bias must have shape [" +
                  std::to_string(w.rank() > 0 ? w.dim(0) : 0) + "], got " +
                  shapeStr(b.shape));
    }
    return makeConvShapes(args, x.shape, w.shape, y.shape, "y");
  }
  case ConvKind::GradInput: {
    const TensorView &dy = args.in(0), &w = args.in(1), &dx = args.out(0);
    checkFloat(args, dy, "dy");
    checkSameDType(args, dy, w, "w");
    checkSameDType(args, dy, dx, "dx");
    return makeConvShapes(args, dx.shape, w.shape, dy.shape, "dy");
  }
  case ConvKind::GradFilter: {
    const TensorView &x = args.in(0), &dy = args.in(1), &dw = args.out(0);
    checkFloat(args, x, "x");
    checkSameDType(args, x, dy, "dy");
    checkSameDType(args, x, dw, "dw");
    return makeConvShapes(args, x.shape, dw.shape, dy.shape, "dy");
  }
  }
  args.fail("unknown convolution kernel");
}

PoolDims makePoolDims(const KernelArgs &args, const std::vector<int64_t> &x,
                      const std::vector<int64_t> &y, bool isMax,
                      const char *yWhat) {
  PoolDims pd;
  if (x.size() < 3)
    args.fail("pooling needs x [N, C, spatial...], got " + shapeStr(x));
  std::vector<int64_t> kernel = args.i64s("kernel_shape");
  pd.g = makeGeo(args, x, kernel, /*hasDilations=*/isMax, args.flag("ceil_mode"),
                 y, x[1], yWhat);
  pd.planes = x[0] * x[1];
  pd.countIncludePad = !isMax && args.flag("count_include_pad");
  return pd;
}

PoolDims readPoolDims(const KernelArgs &args, PoolKind kind) {
  switch (kind) {
  case PoolKind::Max:
  case PoolKind::Avg: {
    const TensorView &x = args.in(0), &y = args.out(0);
    checkFloat(args, x, "x");
    checkSameDType(args, x, y, "y");
    return makePoolDims(args, x.shape, y.shape, kind == PoolKind::Max, "y");
  }
  case PoolKind::MaxGrad: {
    const TensorView &x = args.in(0), &dy = args.in(1), &dx = args.out(0);
    checkFloat(args, x, "x");
    checkSameDType(args, x, dy, "dy");
    checkSameDType(args, x, dx, "dx");
    if (dx.shape != x.shape)
      args.fail("dx must have x's shape " + shapeStr(x.shape) + ", got " +
                shapeStr(dx.shape));
    return makePoolDims(args, x.shape, dy.shape, true, "dy");
  }
  case PoolKind::AvgGrad: {
    const TensorView &dy = args.in(0), &dx = args.out(0);
    checkFloat(args, dy, "dy");
    checkSameDType(args, dy, dx, "dx");
    return makePoolDims(args, dx.shape, dy.shape, false, "dy");
  }
  }
  args.fail("unknown pooling kernel");
}

} // namespace parallax::rt::conv
