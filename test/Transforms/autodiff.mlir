// px-autodiff: one gradient per trainable variable; broadcasting undone by
// reductions; embeddings read only through gather get row-sparse gradients,
// anything else dense ones.
// RUN: parallax-opt %s --split-input-file --px-autodiff --canonicalize --cse | FileCheck %s

// CHECK-LABEL: func.func @main
// The loss is seeded with 1; reduce_mean spreads 1/12 over its input.
// CHECK-DAG: %[[ONE:.*]] = px.constant dense<1.000000e+00> : tensor<f32>
// CHECK-DAG: %[[TWELFTH:.*]] = px.constant dense<0.0833333358> : tensor<f32>
// CHECK-DAG: %[[X:.*]] = px.input "x"
// CHECK-DAG: %[[W:.*]] = px.variable "w"
// CHECK-DAG: %[[B:.*]] = px.variable "b"
// CHECK: %[[SEED:.*]] = px.reshape %[[ONE]] : tensor<f32> -> tensor<1x1xf32>
// CHECK: %[[SCALED:.*]] = px.mul %[[SEED]], %[[TWELFTH]]
// CHECK: %[[DY:.*]] = px.expand %[[SCALED]] : tensor<1x1xf32> -> tensor<4x3xf32>
// b [4, 1] was broadcast along dimension 1:
// CHECK: %[[DB:.*]] = px.reduce_sum %[[DY]] {axes = array<i64: 1>} : tensor<4x3xf32>
// w [3] was broadcast along dimension 0:
// CHECK: %[[XDY:.*]] = px.mul %[[DY]], %[[X]]
// CHECK: %[[DW0:.*]] = px.reduce_sum %[[XDY]] {axes = array<i64: 0>} : tensor<4x3xf32>
// CHECK: %[[DW:.*]] = px.reshape %[[DW0]] : tensor<1x3xf32> -> tensor<3xf32>
// CHECK: px.gradient %[[W]], %[[DW]] : tensor<3xf32>, tensor<3xf32>
// CHECK: px.gradient %[[B]], %[[DB]] : tensor<4x1xf32>, tensor<4x1xf32>
// The data input gets no gradient.
// CHECK-NOT: px.gradient
func.func @main() -> tensor<f32> attributes {px.loss = 0 : i64} {
  %x = px.input "x" : tensor<4x3xf32> batched
  %w = px.variable "w" trainable = dense<0.5> : tensor<3xf32>
  %b = px.variable "b" trainable = dense<0.1> : tensor<4x1xf32>
  %0 = px.mul %x, %w : tensor<4x3xf32>, tensor<3xf32>
  %1 = px.add %0, %b : tensor<4x3xf32>, tensor<4x1xf32>
  %2 = px.reduce_mean %1 {axes = array<i64: 0, 1>, keepdims = false} : tensor<4x3xf32>
  return %2 : tensor<f32>
}

// -----

// "emb" is read only by gathers on axis 0: its gradient is the rows of both
// reads, concatenated, never densified. "out" is also transposed, so it is
// dense: its gather's gradient is a scatter_add.
// CHECK-LABEL: func.func @main
// CHECK-DAG: %[[IDS:.*]] = px.input "ids"
// CHECK-DAG: %[[EMB:.*]] = px.variable "emb"
// CHECK-DAG: %[[OUT:.*]] = px.variable "out"
// CHECK-DAG: %[[SEL:.*]] = px.constant dense<[1, 2]> : tensor<2xi64>
// CHECK: %[[SCATTER:.*]] = px.scatter_add %{{.*}} at %[[SEL]] : tensor<2x4xf32>, tensor<2xi64> -> tensor<10x4xf32>
// CHECK: %[[FLAT:.*]] = px.reshape %[[IDS]] : tensor<2x3xi64> -> tensor<6xi64>
// Negative ids wrap, as px.gather reads them:
// CHECK: %[[NEG:.*]] = px.less %[[FLAT]]
// CHECK: %[[WRAPPED:.*]] = px.where %[[NEG]]
// CHECK: %[[ROWS:.*]] = px.reshape %{{.*}} : tensor<2x3x4xf32> -> tensor<6x4xf32>
// CHECK: %[[DOUT:.*]] = px.add %{{.*}}, %[[SCATTER]] : tensor<10x4xf32>, tensor<10x4xf32>
// CHECK: %[[I:.*]] = px.concat %{{.*}}, %[[WRAPPED]] {axis = 0 : i64} : tensor<2xi64>, tensor<6xi64>
// CHECK: %[[V:.*]] = px.concat %{{.*}}, %[[ROWS]] {axis = 0 : i64} : tensor<2x4xf32>, tensor<6x4xf32>
// CHECK: %[[SG:.*]] = px.make_sparse_grad %[[I]], %[[V]] : tensor<8xi64>, tensor<8x4xf32> -> !px.sparse_grad<8, tensor<10x4xf32>>
// CHECK: px.gradient %[[EMB]], %[[SG]] : tensor<10x4xf32>, !px.sparse_grad<8, tensor<10x4xf32>>
// CHECK: px.gradient %[[OUT]], %[[DOUT]] : tensor<10x4xf32>, tensor<10x4xf32>
// CHECK-NOT: px.densify
func.func @main() -> tensor<f32> attributes {px.loss = 0 : i64} {
  %ids = px.input "ids" : tensor<2x3xi64> batched
  %emb = px.variable "emb" trainable = dense<0.5> : tensor<10x4xf32>
  %out = px.variable "out" trainable = dense<0.5> : tensor<10x4xf32>
  %g0 = px.gather %emb[%ids] : tensor<10x4xf32>, tensor<2x3xi64>
  %sel = px.constant dense<[1, 2]> : tensor<2xi64>
  %g1 = px.gather %out[%sel] : tensor<10x4xf32>, tensor<2xi64>
  %g2 = px.gather %emb[%sel] : tensor<10x4xf32>, tensor<2xi64>
  %s0 = px.reduce_sum %g0 {axes = array<i64: 0, 1, 2>, keepdims = false} : tensor<2x3x4xf32>
  %s1 = px.reduce_sum %g1 {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x4xf32>
  %s2 = px.reduce_sum %g2 {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x4xf32>
  %t = px.transpose %out {perm = array<i64: 1, 0>} : tensor<10x4xf32>
  %s3 = px.reduce_sum %t {axes = array<i64: 0, 1>, keepdims = false} : tensor<4x10xf32>
  %a = px.add %s0, %s1 : tensor<f32>, tensor<f32>
  %b = px.add %a, %s2 : tensor<f32>, tensor<f32>
  %c = px.add %b, %s3 : tensor<f32>, tensor<f32>
  return %c : tensor<f32>
}

// -----

// Batched matmul against a shared matrix (the batch folds into the rows of
// one GEMM per gradient: dX = dY W^T, dW = X^T dY), a vector operand
// (promoted to a matrix and back), and Gemm with both transposes, alpha, beta
// and a broadcast C. "unused" gets no gradient.
// CHECK-LABEL: func.func @main
// CHECK-DAG: %[[X:.*]] = px.input "x"
// CHECK-DAG: %[[W:.*]] = px.variable "w"
// CHECK-DAG: %[[U:.*]] = px.variable "u"
// CHECK-DAG: %[[A:.*]] = px.variable "a"
// CHECK-DAG: %[[BB:.*]] = px.variable "bb"
// CHECK-DAG: %[[C:.*]] = px.variable "c"
// CHECK: %[[DA:.*]] = px.gemm %[[BB]], %[[DY:.*]] {alpha = 2.000000e+00 : f32, trans_a, trans_b} : tensor<5x6xf32>, tensor<4x5xf32>
// CHECK: %[[DBB:.*]] = px.gemm %[[DY]], %[[A]] {alpha = 2.000000e+00 : f32, trans_a, trans_b} : tensor<4x5xf32>, tensor<6x4xf32>
// CHECK: %[[DC3:.*]] = px.mul %[[DY]], %{{.*}} : tensor<4x5xf32>, tensor<f32>
// CHECK: %[[DC1:.*]] = px.reduce_sum %[[DC3]] {axes = array<i64: 0>} : tensor<4x5xf32>
// CHECK: %[[DC:.*]] = px.reshape %[[DC1]] : tensor<1x5xf32> -> tensor<5xf32>
// CHECK: %[[DY1:.*]] = px.reshape %{{.*}} : tensor<2x4x1xf32> -> tensor<8x1xf32>
// CHECK: %[[D0F:.*]] = px.gemm %[[DY1]], %{{.*}} {trans_b} : tensor<8x1xf32>, tensor<5x1xf32>
// CHECK: %[[D0:.*]] = px.reshape %[[D0F]] : tensor<8x5xf32> -> tensor<2x4x5xf32>
// CHECK: px.gemm %{{.*}}, %[[DY1]] {trans_a} : tensor<8x5xf32>, tensor<8x1xf32>
// CHECK: %[[XF:.*]] = px.reshape %[[X]] : tensor<2x4x3xf32> -> tensor<8x3xf32>
// CHECK: %[[D0R:.*]] = px.reshape %[[D0]] : tensor<2x4x5xf32> -> tensor<8x5xf32>
// CHECK: %[[DW:.*]] = px.gemm %[[XF]], %[[D0R]] {trans_a} : tensor<8x3xf32>, tensor<8x5xf32>
// CHECK: px.gradient %[[W]], %[[DW]] : tensor<3x5xf32>
// CHECK: px.gradient %[[U]], %{{.*}} : tensor<5xf32>, tensor<5xf32>
// CHECK: px.gradient %[[A]], %[[DA]] : tensor<6x4xf32>
// CHECK: px.gradient %[[BB]], %[[DBB]] : tensor<5x6xf32>
// CHECK: px.gradient %[[C]], %[[DC]] : tensor<5xf32>
// CHECK-NOT: px.gradient
func.func @main() -> tensor<f32> attributes {px.loss = 0 : i64} {
  %x = px.input "x" : tensor<2x4x3xf32> batched
  %w = px.variable "w" trainable = dense<0.5> : tensor<3x5xf32>
  %u = px.variable "u" trainable = dense<0.5> : tensor<5xf32>
  %a = px.variable "a" trainable = dense<0.5> : tensor<6x4xf32>
  %bb = px.variable "bb" trainable = dense<0.5> : tensor<5x6xf32>
  %c = px.variable "c" trainable = dense<0.5> : tensor<5xf32>
  %unused = px.variable "unused" trainable = dense<0.5> : tensor<5xf32>
  %0 = px.matmul %x, %w : tensor<2x4x3xf32>, tensor<3x5xf32>
  %1 = px.matmul %0, %u : tensor<2x4x5xf32>, tensor<5xf32>
  %2 = px.gemm %a, %bb, %c {trans_a, trans_b, alpha = 2.0 : f32, beta = 3.0 : f32} : tensor<6x4xf32>, tensor<5x6xf32>, tensor<5xf32>
  %3 = px.reduce_sum %1 {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x4xf32>
  %4 = px.reduce_sum %2 {axes = array<i64: 0, 1>, keepdims = false} : tensor<4x5xf32>
  %5 = px.add %3, %4 : tensor<f32>, tensor<f32>
  return %5 : tensor<f32>
}

// -----

// Both operands batched: one product per batch element (broadcast over the
// leading 1 of x), and the gradient of the broadcast operand summed over the
// batch it was broadcast along.
// CHECK-LABEL: func.func @main
// CHECK-DAG: %[[X:.*]] = px.variable "x"
// CHECK-DAG: %[[V:.*]] = px.variable "v"
// CHECK: %[[VT:.*]] = px.transpose %[[V]] {perm = array<i64: 0, 2, 1>} : tensor<2x3x5xf32>
// CHECK: %[[DXB:.*]] = px.matmul %{{.*}}, %[[VT]] : tensor<2x4x5xf32>, tensor<2x5x3xf32>
// CHECK: %[[DX1:.*]] = px.reduce_sum %[[DXB]] {axes = array<i64: 0>} : tensor<2x4x3xf32>
// CHECK: %[[XT:.*]] = px.transpose %[[X]] {perm = array<i64: 0, 2, 1>} : tensor<1x4x3xf32>
// CHECK: %[[DV:.*]] = px.matmul %[[XT]], %{{.*}} : tensor<1x3x4xf32>, tensor<2x4x5xf32>
// CHECK: px.gradient %[[V]], %[[DV]] : tensor<2x3x5xf32>
func.func @main() -> tensor<f32> attributes {px.loss = 0 : i64} {
  %x = px.variable "x" trainable = dense<0.25> : tensor<1x4x3xf32>
  %v = px.variable "v" trainable = dense<0.5> : tensor<2x3x5xf32>
  %0 = px.matmul %x, %v : tensor<1x4x3xf32>, tensor<2x3x5xf32>
  %1 = px.reduce_sum %0 {axes = array<i64: 0, 1, 2>, keepdims = false} : tensor<2x4x5xf32>
  return %1 : tensor<f32>
}

// -----

// A small CNN: conv with bias, training batch norm, pooling, layer norm,
// dropout and softmax cross entropy, each through its backward kernel.
// CHECK-LABEL: func.func @main
// CHECK: %[[LOSS:.*]], %[[LP:.*]] = px.softmax_cross_entropy_loss
// CHECK: px.softmax_cross_entropy_loss_grad %{{.*}}, %[[LP]], %{{.*}} : tensor<f32>, tensor<2x5xf32>, tensor<2xi64>
// CHECK: px.dropout_grad %{{.*}}, %{{.*}} {ratio = 2.500000e-01 : f32} : tensor<2x4x16xf32>, tensor<2x4x16xi1>
// CHECK: %[[LDX:.*]], %[[LDS:.*]], %{{.*}} = px.layer_norm_grad
// CHECK: px.avg_pool_grad %{{.*}} {kernel_shape = array<i64: 2, 2>, pads = array<i64: 0, 0, 1, 1>, strides = array<i64: 1, 1>} : tensor<2x4x4x4xf32> -> tensor<2x4x4x4xf32>
// CHECK: px.max_pool_grad
// CHECK: %[[BDX:.*]], %[[BDS:.*]], %[[BDB:.*]] = px.batch_norm_grad
// CHECK: %[[DW:.*]] = px.conv_grad_filter %{{.*}}, %[[BDX]] {{.*}} -> tensor<4x3x3x3xf32>
// The input is not trainable: no conv_grad_input.
// CHECK-NOT: px.conv_grad_input
// CHECK: %[[DB:.*]] = px.reduce_sum %[[BDX]] {axes = array<i64: 0, 2, 3>, keepdims = false}
// CHECK: px.gradient %{{.*}}, %[[DW]] : tensor<4x3x3x3xf32>
// CHECK: px.gradient %{{.*}}, %[[DB]] : tensor<4xf32>
// CHECK: px.gradient %{{.*}}, %[[BDS]] : tensor<4xf32>
// CHECK: px.gradient %{{.*}}, %[[BDB]] : tensor<4xf32>
// CHECK: px.gradient %{{.*}}, %[[LDS]] : tensor<16xf32>
// CHECK: px.gradient
// CHECK-NOT: px.gradient
func.func @main() -> tensor<f32> attributes {px.loss = 0 : i64} {
  %x = px.input "x" : tensor<2x3x8x8xf32> batched
  %y = px.input "y" : tensor<2xi64> batched
  %w = px.variable "w" trainable = dense<0.5> : tensor<4x3x3x3xf32>
  %b = px.variable "b" trainable = dense<0.5> : tensor<4xf32>
  %s = px.variable "s" trainable = dense<1.0> : tensor<4xf32>
  %t = px.variable "t" trainable = dense<0.0> : tensor<4xf32>
  %rm = px.variable "rm" = dense<0.0> : tensor<4xf32>
  %rv = px.variable "rv" = dense<1.0> : tensor<4xf32>
  %ls = px.variable "ls" trainable = dense<1.0> : tensor<16xf32>
  %fc = px.variable "fc" trainable = dense<0.1> : tensor<5x16xf32>
  %0 = px.conv %x, %w, %b {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 1 : i64} : tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>
  %1:3 = px.batch_norm %0, %s, %t, %rm, %rv {training} : tensor<2x4x8x8xf32>, tensor<4xf32>
  %2 = px.max_pool %1#0 {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : tensor<2x4x8x8xf32>
  %3 = px.avg_pool %2 {kernel_shape = array<i64: 2, 2>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 1, 1>} : tensor<2x4x4x4xf32>
  %4 = px.reshape %3 : tensor<2x4x4x4xf32> -> tensor<2x4x16xf32>
  %5:3 = px.layer_norm %4, %ls : tensor<2x4x16xf32>, tensor<16xf32>
  %6:2 = px.dropout %5#0 {ratio = 0.25 : f32} : tensor<2x4x16xf32>
  %7 = px.reduce_mean %6#0 {axes = array<i64: 1>, keepdims = false} : tensor<2x4x16xf32>
  %8 = px.gemm %7, %fc {trans_b} : tensor<2x16xf32>, tensor<5x16xf32>
  %loss, %lp = px.softmax_cross_entropy_loss %8, %y : tensor<2x5xf32>, tensor<2xi64>
  return %loss : tensor<f32>
}

// -----

// Comparisons, integer computations and casts to integers carry no gradient
// and are not an error; where, max, clip and erf pass gradients through.
// CHECK-LABEL: func.func @main
// CHECK: px.erf
// CHECK: px.gradient %{{.*}}, %{{.*}} : tensor<4xf32>, tensor<4xf32>
func.func @main() -> tensor<f32> attributes {px.loss = 0 : i64} {
  %x = px.input "x" : tensor<4xf32> batched
  %w = px.variable "w" trainable = dense<0.5> : tensor<4xf32>
  %0 = px.mul %x, %w : tensor<4xf32>, tensor<4xf32>
  %1 = px.greater %0, %x : tensor<4xf32>, tensor<4xf32>
  %2 = px.cast %0 : tensor<4xf32> -> tensor<4xi64>
  %3 = px.cast %2 : tensor<4xi64> -> tensor<4xf32>
  %4 = px.where %1, %0, %3 : tensor<4xi1>, tensor<4xf32>, tensor<4xf32>
  %5 = px.max %4, %x : tensor<4xf32>, tensor<4xf32>
  %6 = px.clip %5 {min = -1.0 : f64, max = 1.0 : f64} : tensor<4xf32>
  %7 = px.erf %6 : tensor<4xf32>
  %8 = px.reduce_sum %7 {axes = array<i64: 0>, keepdims = false} : tensor<4xf32>
  return %8 : tensor<f32>
}
