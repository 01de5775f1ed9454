// px-pad-vocabulary alone: on 4 model ranks a vocabulary of 27 words is
// padded to 28. @tied: the table (read by a row gather and, transposed, by
// the output layer) gets a zero row, the output bias a zero, the scores a
// column masked to -1e30 before the loss, which records its 27 classes.
// RUN: parallax-opt %s --split-input-file --px-pad-vocabulary | FileCheck %s

// CHECK-LABEL: func.func @tied
// CHECK-DAG: px.variable "bias" trainable = #px.onnx_initializer<"bias", padded from [27]> : tensor<28xf32>
// CHECK-DAG: px.variable "embed" trainable = #px.onnx_initializer<"embed", padded from [27, 16]> : tensor<28x16xf32>
// CHECK: px.gather %{{.*}}[%{{.*}}] : tensor<28x16xf32>, tensor<8x6xi64>
// CHECK: px.transpose %{{.*}} {perm = array<i64: 1, 0>} : tensor<28x16xf32>
// CHECK: px.matmul %{{.*}}, %{{.*}} : tensor<8x6x16xf32>, tensor<16x28xf32>
// CHECK: px.add %{{.*}}, %{{.*}} : tensor<8x6x28xf32>, tensor<28xf32>
// CHECK: px.reshape %{{.*}} : tensor<8x6x28xf32> -> tensor<48x28xf32>
// CHECK: %[[MASK:.*]] = px.constant dense<[0.000000e+00, {{.*}}, 0.000000e+00, -1.000000e+30]> : tensor<28xf32>
// CHECK: %[[MASKED:.*]] = px.add %{{.*}}, %[[MASK]] : tensor<48x28xf32>, tensor<28xf32>
// CHECK: px.softmax_cross_entropy_loss %[[MASKED]], %{{.*}} {{{.*}}px.classes = 27 : i64{{.*}}} : tensor<48x28xf32>, tensor<48xi64>
module attributes {px.world_size = 4 : i64, px.ranks_per_machine = 4 : i64, px.model_ranks = 4 : i64} {
  func.func @tied() -> tensor<f32> attributes {px.loss = 0 : i64} {
    %tokens = px.input "tokens" : tensor<8x6xi64> batched
    %targets = px.input "targets" : tensor<48xi64> batched
    %embed = px.variable "embed" trainable = #px.onnx_initializer<"embed"> : tensor<27x16xf32>
    %bias = px.variable "bias" trainable = #px.onnx_initializer<"bias"> : tensor<27xf32>
    %h = px.gather %embed[%tokens] : tensor<27x16xf32>, tensor<8x6xi64>
    %t = px.transpose %embed {perm = array<i64: 1, 0>} : tensor<27x16xf32>
    %s = px.matmul %h, %t : tensor<8x6x16xf32>, tensor<16x27xf32>
    %b = px.add %s, %bias : tensor<8x6x27xf32>, tensor<27xf32>
    %r = px.reshape %b : tensor<8x6x27xf32> -> tensor<48x27xf32>
    %loss, %log_prob = px.softmax_cross_entropy_loss %r, %targets : tensor<48x27xf32>, tensor<48xi64>
    return %loss : tensor<f32>
  }
}

// -----

// An output layer of its own (a gemm by [27, 16], trans_b, its bias in the
// gemm), and a table read only by gathers: padded too.
// CHECK-LABEL: func.func @untied
// CHECK-DAG: px.variable "out.weight" trainable = #px.onnx_initializer<"out.weight", padded from [27, 16]> : tensor<28x16xf32>
// CHECK-DAG: px.variable "out.bias" trainable = #px.onnx_initializer<"out.bias", padded from [27]> : tensor<28xf32>
// CHECK-DAG: px.variable "table" trainable = #px.onnx_initializer<"table", padded from [27, 16]> : tensor<28x16xf32>
// CHECK: px.gemm %{{.*}}, %{{.*}}, %{{.*}} {trans_b} : tensor<48x16xf32>, tensor<28x16xf32>, tensor<28xf32>
// CHECK: px.softmax_cross_entropy_loss {{.*}} : tensor<48x28xf32>, tensor<48xi64>
module attributes {px.world_size = 4 : i64, px.ranks_per_machine = 4 : i64, px.model_ranks = 4 : i64} {
  func.func @untied() -> tensor<f32> attributes {px.loss = 0 : i64} {
    %tokens = px.input "tokens" : tensor<48xi64> batched
    %targets = px.input "targets" : tensor<48xi64> batched
    %table = px.variable "table" trainable = #px.onnx_initializer<"table"> : tensor<27x16xf32>
    %w = px.variable "out.weight" trainable = #px.onnx_initializer<"out.weight"> : tensor<27x16xf32>
    %bias = px.variable "out.bias" trainable = #px.onnx_initializer<"out.bias"> : tensor<27xf32>
    %h = px.gather %table[%tokens] : tensor<27x16xf32>, tensor<48xi64>
    %s = px.gemm %h, %w, %bias {trans_b} : tensor<48x16xf32>, tensor<27x16xf32>, tensor<27xf32>
    %loss, %log_prob = px.softmax_cross_entropy_loss %s, %targets : tensor<48x27xf32>, tensor<48xi64>
    return %loss : tensor<f32>
  }
}

// -----

// Left as they are: classes that divide by the ranks (28), a loss with
// class weights, a classifier with fewer classes (27) than inputs (32), a
// table that something other than a gather reads, a table of fewer rows
// than its width (2 token types), a splat initial value (no initializer
// to name its own shape), and an output weight whose classes are its
// second dimension that a row gather also reads.
// CHECK-LABEL: func.func @kept
// CHECK-NOT: padded from
// CHECK-NOT: px.classes
module attributes {px.world_size = 4 : i64, px.ranks_per_machine = 4 : i64, px.model_ranks = 4 : i64} {
  func.func @kept() -> (tensor<f32>, tensor<f32>, tensor<27x16xf32>, tensor<f32>, tensor<f32>) attributes {px.loss = 0 : i64} {
    %x = px.input "x" : tensor<48x16xf32> batched
    %targets = px.input "targets" : tensor<48xi64> batched
    %tokens = px.input "tokens" : tensor<48xi64> batched
    %w = px.variable "w" trainable = #px.onnx_initializer<"w"> : tensor<28x16xf32>
    %s = px.gemm %x, %w {trans_b} : tensor<48x16xf32>, tensor<28x16xf32>
    %loss, %log_prob = px.softmax_cross_entropy_loss %s, %targets : tensor<48x28xf32>, tensor<48xi64>
    %w2 = px.variable "w2" trainable = #px.onnx_initializer<"w2"> : tensor<27x16xf32>
    %cw = px.variable "cw" = dense<1.0> : tensor<27xf32>
    %s2 = px.gemm %x, %w2 {trans_b} : tensor<48x16xf32>, tensor<27x16xf32>
    %loss2, %log_prob2 = px.softmax_cross_entropy_loss %s2, %targets, %cw : tensor<48x27xf32>, tensor<48xi64>, tensor<27xf32>
    %table = px.variable "table" trainable = #px.onnx_initializer<"table"> : tensor<27x16xf32>
    %h = px.gather %table[%tokens] : tensor<27x16xf32>, tensor<48xi64>
    %twice = px.add %table, %table : tensor<27x16xf32>, tensor<27x16xf32>
    %x3 = px.input "x3" : tensor<48x32xf32> batched
    %w3 = px.variable "classifier" trainable = #px.onnx_initializer<"classifier"> : tensor<27x32xf32>
    %s3 = px.gemm %x3, %w3 {trans_b} : tensor<48x32xf32>, tensor<27x32xf32>
    %loss3, %log_prob3 = px.softmax_cross_entropy_loss %s3, %targets : tensor<48x27xf32>, tensor<48xi64>
    %types = px.variable "types" trainable = #px.onnx_initializer<"types"> : tensor<2x16xf32>
    %tt = px.gather %types[%tokens] : tensor<2x16xf32>, tensor<48xi64>
    %splat = px.variable "splat" trainable = dense<0.1> : tensor<27x16xf32>
    %sp = px.gather %splat[%tokens] : tensor<27x16xf32>, tensor<48xi64>
    %x4 = px.input "x4" : tensor<48x16xf32> batched
    %w4 = px.variable "both" trainable = #px.onnx_initializer<"both"> : tensor<16x27xf32>
    %g4 = px.gather %w4[%tokens] : tensor<16x27xf32>, tensor<48xi64>
    %s4 = px.gemm %x4, %w4 : tensor<48x16xf32>, tensor<16x27xf32>
    %loss4, %log_prob4 = px.softmax_cross_entropy_loss %s4, %targets : tensor<48x27xf32>, tensor<48xi64>
    return %loss, %loss2, %twice, %loss3, %loss4 : tensor<f32>, tensor<f32>, tensor<27x16xf32>, tensor<f32>, tensor<f32>
  }
}

// -----

// One model rank (data parallelism): nothing to pad.
// CHECK-LABEL: func.func @one
// CHECK-NOT: padded from
module attributes {px.world_size = 4 : i64, px.ranks_per_machine = 4 : i64} {
  func.func @one() -> tensor<f32> attributes {px.loss = 0 : i64} {
    %x = px.input "x" : tensor<48x16xf32> batched
    %targets = px.input "targets" : tensor<48xi64> batched
    %w = px.variable "w" trainable = #px.onnx_initializer<"w"> : tensor<27x16xf32>
    %s = px.gemm %x, %w {trans_b} : tensor<48x16xf32>, tensor<27x16xf32>
    %loss, %log_prob = px.softmax_cross_entropy_loss %s, %targets : tensor<48x27xf32>, tensor<48xi64>
    return %loss : tensor<f32>
  }
}
