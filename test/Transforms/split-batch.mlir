// px-split-batch on static models (torch.onnx.export's default): which
// inputs hold the samples, each rank's share, and the ops that stop it.
// RUN: parallax-opt %s --split-input-file --px-split-batch='ranks=2' 2>/dev/null | FileCheck %s
// RUN: parallax-opt %s --split-input-file --px-split-batch='ranks=2' 2>&1 >/dev/null | FileCheck %s --check-prefix=REMARK
// RUN: parallax-opt %s --split-input-file --px-split-batch='batch-size=12' 2>&1 | FileCheck %s --check-prefix=GLOBAL

// A classifier: x [4, 6] and y [4] share their leading dimension; the
// output layer's weight does not come from the samples.
// REMARK: remark: batch: 'x', 'y' hold 2 samples per rank and step (exported with a static batch of 4 samples: the leading dimension they share
// CHECK-LABEL: func.func @main
// CHECK: px.input "x" : tensor<2x6xf32> batched
// CHECK: px.input "y" : tensor<2xi64> batched
// CHECK: px.gemm %{{.*}}, %{{.*}}, %{{.*}} {trans_b} : tensor<2x6xf32>, tensor<3x6xf32>, tensor<3xf32>
// CHECK: px.softmax_cross_entropy_loss %{{.*}}, %{{.*}} : tensor<2x3xf32>, tensor<2xi64>
// GLOBAL-LABEL: remark: batch: 'x', 'y' hold 12 samples per rank and step
// GLOBAL: px.input "x" : tensor<12x6xf32> batched
module attributes {px.source = "m.onnx"} {
  func.func @main() -> tensor<f32> attributes {px.loss = 0 : i64} {
    %x = px.input "x" : tensor<4x6xf32>
    %y = px.input "y" : tensor<4xi64>
    %w = px.variable "w" trainable = dense<0.5> : tensor<3x6xf32>
    %b = px.variable "b" trainable = dense<0.0> : tensor<3xf32>
    %h = px.gemm %x, %w, %b {trans_b} : tensor<4x6xf32>, tensor<3x6xf32>, tensor<3xf32>
    %loss, %lp = px.softmax_cross_entropy_loss %h, %y : tensor<4x3xf32>, tensor<4xi64>
    return %loss : tensor<f32>
  }
}

// -----

// A language model: the samples are flattened into the rows of [B*T, D]
// and split back; positions are a constant repeated for every sample; the
// sampled candidates (leading dimension 7) are the same for every sample.
// Dropout on [B*T, D] and on [T, B, D] numbers the global batch's elements
// (sample_stride: elements between consecutive samples).
// REMARK: remark: batch: 'tokens', 'targets' hold 2 samples per rank and step
// REMARK-SAME: 'cands' the same for every sample
// CHECK-LABEL: func.func @main
// CHECK: px.input "tokens" : tensor<2x3xi64> batched
// CHECK: px.input "cands" : tensor<7xi64>{{$}}
// CHECK: px.constant dense<{{\[\[}}0, 1, 2], [0, 1, 2]]> : tensor<2x3xi64>
// CHECK: px.reshape %{{.*}} : tensor<2x3x8xf32> -> tensor<6x8xf32>
// CHECK: px.dropout %{{.*}} {ratio = 1.000000e-01 : f32, sample_stride = 24 : i64} : tensor<6x8xf32>
// CHECK: px.transpose %{{.*}} {perm = array<i64: 1, 0, 2>} : tensor<2x3x8xf32>
// CHECK: px.dropout %{{.*}} {ratio = 1.000000e-01 : f32, sample_stride = 8 : i64} : tensor<3x2x8xf32>
// CHECK: px.matmul %{{.*}}, %{{.*}} : tensor<6x8xf32>, tensor<8x7xf32>
// CHECK: px.reshape %{{.*}} : tensor<6x7xf32> -> tensor<2x3x7xf32>
module {
  func.func @main() -> tensor<f32> attributes {px.loss = 0 : i64} {
    %tokens = px.input "tokens" : tensor<4x3xi64>
    %targets = px.input "targets" : tensor<4x3xi64>
    %cands = px.input "cands" : tensor<7xi64>
    %emb = px.variable "emb" trainable = dense<0.1> : tensor<50x8xf32>
    %pos = px.variable "pos" trainable = dense<0.2> : tensor<3x8xf32>
    %out = px.variable "out" trainable = dense<0.3> : tensor<50x8xf32>
    %positions = px.constant dense<[[0, 1, 2], [0, 1, 2], [0, 1, 2], [0, 1, 2]]> : tensor<4x3xi64>
    %e = px.gather %emb[%tokens] : tensor<50x8xf32>, tensor<4x3xi64>
    %p = px.gather %pos[%positions] : tensor<3x8xf32>, tensor<4x3xi64>
    %h = px.add %e, %p : tensor<4x3x8xf32>, tensor<4x3x8xf32>
    %rows = px.reshape %h : tensor<4x3x8xf32> -> tensor<12x8xf32>
    %d, %m = px.dropout %rows {ratio = 0.1 : f32} : tensor<12x8xf32>
    %t = px.transpose %h {perm = array<i64: 1, 0, 2>} : tensor<4x3x8xf32>
    %d2, %m2 = px.dropout %t {ratio = 0.1 : f32} : tensor<3x4x8xf32>
    %w = px.gather %out[%cands] : tensor<50x8xf32>, tensor<7xi64>
    %wt = px.transpose %w {perm = array<i64: 1, 0>} : tensor<7x8xf32>
    %logits = px.matmul %d, %wt : tensor<12x8xf32>, tensor<8x7xf32>
    %l3 = px.reshape %logits : tensor<12x7xf32> -> tensor<4x3x7xf32>
    %scores = px.transpose %l3 {perm = array<i64: 0, 2, 1>} : tensor<4x3x7xf32>
    %loss, %lp = px.softmax_cross_entropy_loss %scores, %targets : tensor<4x7x3xf32>, tensor<4x3xi64>
    return %loss : tensor<f32>
  }
}

// -----

// Attention's batched matmuls keep samples apart along a leading dimension.
// REMARK: remark: batch: 'q' hold 2 samples per rank and step
// CHECK-LABEL: func.func @main
// CHECK: px.matmul %{{.*}}, %{{.*}} : tensor<2x2x5x4xf32>, tensor<2x2x4x5xf32>
module {
  func.func @main() -> tensor<f32> attributes {px.loss = 0 : i64} {
    %q = px.input "q" : tensor<4x2x5x4xf32>
    %k = px.transpose %q {perm = array<i64: 0, 1, 3, 2>} : tensor<4x2x5x4xf32>
    %s = px.matmul %q, %k : tensor<4x2x5x4xf32>, tensor<4x2x4x5xf32>
    %a = px.softmax %s {axis = -1 : i64} : tensor<4x2x5x5xf32>
    %r = px.reduce_mean %a {axes = array<i64: 0, 1, 2, 3>, keepdims = false} : tensor<4x2x5x5xf32>
    return %r : tensor<f32>
  }
}

// -----

// When taking every input of the common leading dimension fails, each is
// tried as shared: here 'ids' (candidate rows of the output table, the same
// for every sample) only has the batch's length by chance.
// REMARK: remark: batch: 'x', 'y' hold 2 samples per rank and step
// REMARK-SAME: 'ids' is shared: taken as batched, node 'logits' (px.matmul) multiplies samples that lie along different dimensions); 'ids' the same for every sample
// CHECK-LABEL: func.func @main
// CHECK: px.input "ids" : tensor<4xi64>{{$}}
// CHECK: px.matmul %{{.*}}, %{{.*}} : tensor<2x8xf32>, tensor<8x4xf32>
module {
  func.func @main() -> tensor<f32> attributes {px.loss = 0 : i64} {
    %x = px.input "x" : tensor<4x8xf32>
    %ids = px.input "ids" : tensor<4xi64>
    %y = px.input "y" : tensor<4xi64>
    %table = px.variable "table" trainable = dense<0.1> : tensor<50x8xf32>
    %w = px.gather %table[%ids] : tensor<50x8xf32>, tensor<4xi64>
    %wt = px.transpose %w {perm = array<i64: 1, 0>} : tensor<4x8xf32>
    %logits = px.matmul %x, %wt : tensor<4x8xf32>, tensor<8x4xf32> loc("logits")
    %loss, %lp = px.softmax_cross_entropy_loss %logits, %y : tensor<4x4xf32>, tensor<4xi64>
    return %loss : tensor<f32>
  }
}

// -----

// A sum over the samples divided by the batch size (KL divergence's
// 'batchmean', `loss.sum() / x.size(0)`) is a mean; the batch size, a
// number in a static export, becomes the per-rank batch.
// REMARK: remark: batch: 'x' hold 2 samples per rank and step
// CHECK-LABEL: func.func @main
// CHECK: %[[SUM:.*]] = px.reduce_sum %{{.*}} {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x3xf32>
// CHECK: %[[TWO:.*]] = px.constant dense<2.000000e+00> : tensor<f32>
// CHECK: px.div %[[SUM]], %[[TWO]] : tensor<f32>, tensor<f32>
module {
  func.func @main() -> tensor<f32> attributes {px.loss = 0 : i64} {
    %x = px.input "x" : tensor<4x3xf32>
    %w = px.variable "w" trainable = dense<0.5> : tensor<3xf32>
    %four = px.constant dense<4.0> : tensor<f32>
    %h = px.mul %x, %w : tensor<4x3xf32>, tensor<3xf32>
    %s = px.reduce_sum %h {axes = array<i64: 0, 1>, keepdims = false} : tensor<4x3xf32>
    %r = px.div %s, %four : tensor<f32>, tensor<f32>
    return %r : tensor<f32>
  }
}

// -----

// Ops along one axis that is not the samples' (padding, cumulative sums,
// top-k, arg-max) and a transposed convolution (samples first) keep them.
// REMARK: remark: batch: 'x' hold 2 samples per rank and step
// CHECK-LABEL: func.func @main
// CHECK: px.pad %{{.*}} {pads = array<i64: 0, 0, 1, 1, 0, 0, 1, 1>} : tensor<2x3x4x4xf32>
// CHECK: px.conv_grad_input %{{.*}}, %{{.*}} {{.*}} : tensor<2x3x6x6xf32>, tensor<3x2x3x3xf32> -> tensor<2x2x8x8xf32>
// CHECK: px.cumsum %{{.*}} {axis = 1 : i64} : tensor<2x128xf32>
// CHECK: px.top_k %{{.*}} {k = 2 : i64} : tensor<2x128xf32>
// CHECK: px.arg_max %{{.*}} {axis = 1 : i64, keepdims = false} : tensor<2x2xf32>
module {
  func.func @main() -> tensor<f32> attributes {px.loss = 0 : i64} {
    %x = px.input "x" : tensor<4x3x4x4xf32>
    %w = px.variable "w" trainable = dense<0.1> : tensor<3x2x3x3xf32>
    %p = px.pad %x {pads = array<i64: 0, 0, 1, 1, 0, 0, 1, 1>} : tensor<4x3x4x4xf32>
    %t = px.conv_grad_input %p, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : tensor<4x3x6x6xf32>, tensor<3x2x3x3xf32> -> tensor<4x2x8x8xf32>
    %f = px.reshape %t : tensor<4x2x8x8xf32> -> tensor<4x128xf32>
    %c = px.cumsum %f {axis = 1 : i64} : tensor<4x128xf32>
    %v, %i = px.top_k %c {k = 2 : i64} : tensor<4x128xf32>
    %a = px.arg_max %v {axis = 1 : i64, keepdims = false} : tensor<4x2xf32>
    %af = px.cast %a : tensor<4xi64> -> tensor<4xf32>
    %r = px.reduce_mean %af {axes = array<i64: 0>, keepdims = false} : tensor<4xf32>
    return %r : tensor<f32>
  }
}

