// px-recompute's `layers` on a residual stream: a segment follows only
// the values its own layer computes (variables and constants aside), so a
// join with the model's input, or of two checkpointed layers' segments,
// ends it; the join stays kept and is the checkpoint.
// RUN: parallax-opt %s --split-input-file --px-recompute='fraction=0 layers=fc1.weight' | FileCheck %s --check-prefix=INPUT
// RUN: parallax-opt %s --split-input-file --px-recompute='fraction=0 layers=fc0.weight,fc1.weight' | FileCheck %s --check-prefix=CHAIN

// The join with the input x is not fc1's: one add, never cloned.
// INPUT: px.gemm %{{.*}}, %{{.*}} {px.recomputed, trans_b} : tensor<4x6xf32>, tensor<6x6xf32>
// INPUT-NOT: px.add {{.*}}px.recomputed
// INPUT: px.tanh
module {
  func.func @main() -> tensor<4x2xf32> attributes {px.loss = 0 : i64} {
    %x = px.input "x" : tensor<4x6xf32> batched
    %dy = px.input "dy" : tensor<4x2xf32>
    %w0 = px.variable "fc0.weight" trainable = dense<0.05> : tensor<6x6xf32>
    %w1 = px.variable "fc1.weight" trainable = dense<0.1> : tensor<6x6xf32>
    %w2 = px.variable "fc2.weight" trainable = dense<0.2> : tensor<2x6xf32>
    %h1 = px.gemm %x, %w1 {trans_b} : tensor<4x6xf32>, tensor<6x6xf32>
    %r1 = px.relu %h1 : tensor<4x6xf32>
    %s1 = px.add %x, %r1 : tensor<4x6xf32>, tensor<4x6xf32>
    %y = px.gemm %s1, %w2 {trans_b} : tensor<4x6xf32>, tensor<2x6xf32>
    %zero = px.constant dense<0.0> : tensor<f32>
    %dw2 = px.gemm %dy, %s1 {trans_a} : tensor<4x2xf32>, tensor<4x6xf32>
    %ds1 = px.gemm %dy, %w2 : tensor<4x2xf32>, tensor<2x6xf32>
    %p1 = px.greater %h1, %zero : tensor<4x6xf32>, tensor<f32>
    %dh1 = px.where %p1, %ds1, %zero : tensor<4x6xi1>, tensor<4x6xf32>, tensor<f32>
    %dw1 = px.gemm %dh1, %x {trans_a} : tensor<4x6xf32>, tensor<4x6xf32>
    px.gradient %w1, %dw1 : tensor<6x6xf32>, tensor<6x6xf32>
    px.gradient %w2, %dw2 : tensor<2x6xf32>, tensor<2x6xf32>
    return %y : tensor<4x2xf32>
  }
}

// -----

// fc0's and fc1's segments both recompute (fc1 reads fc0's tanh, which fc1's
// weight gradient reads: recomputed from fc0's clone), but their join s is
// neither's: kept, and read by fc2's gradient as it is.
// CHAIN: px.tanh
// CHAIN: %[[S:.*]] = px.add %[[R0:.*]], %[[R1:.*]] : tensor<4x6xf32>, tensor<4x6xf32>
// CHAIN: px.gemm %{{.*}}, %[[S]] {trans_a} : tensor<4x2xf32>, tensor<4x6xf32>
// CHAIN-DAG: px.gemm %{{.*}}, %{{.*}} {px.recomputed, trans_b} : tensor<4x6xf32>, tensor<6x6xf32>
// CHAIN-DAG: px.tanh %{{.*}} {px.recomputed} : tensor<4x6xf32>
// CHAIN-NOT: px.add {{.*}}px.recomputed
module {
  func.func @main() -> tensor<4x2xf32> attributes {px.loss = 0 : i64} {
    %x = px.input "x" : tensor<4x6xf32> batched
    %dy = px.input "dy" : tensor<4x2xf32>
    %w0 = px.variable "fc0.weight" trainable = dense<0.05> : tensor<6x6xf32>
    %w1 = px.variable "fc1.weight" trainable = dense<0.1> : tensor<6x6xf32>
    %w2 = px.variable "fc2.weight" trainable = dense<0.2> : tensor<2x6xf32>
    %h0 = px.gemm %x, %w0 {trans_b} : tensor<4x6xf32>, tensor<6x6xf32>
    %r0 = px.tanh %h0 : tensor<4x6xf32>
    %h1 = px.gemm %r0, %w1 {trans_b} : tensor<4x6xf32>, tensor<6x6xf32>
    %r1 = px.relu %h1 : tensor<4x6xf32>
    %s = px.add %r0, %r1 : tensor<4x6xf32>, tensor<4x6xf32>
    %y = px.gemm %s, %w2 {trans_b} : tensor<4x6xf32>, tensor<2x6xf32>
    %zero = px.constant dense<0.0> : tensor<f32>
    %one = px.constant dense<1.0> : tensor<f32>
    %dw2 = px.gemm %dy, %s {trans_a} : tensor<4x2xf32>, tensor<4x6xf32>
    %ds = px.gemm %dy, %w2 : tensor<4x2xf32>, tensor<2x6xf32>
    %p1 = px.greater %h1, %zero : tensor<4x6xf32>, tensor<f32>
    %dh1 = px.where %p1, %ds, %zero : tensor<4x6xi1>, tensor<4x6xf32>, tensor<f32>
    %dw1 = px.gemm %dh1, %r0 {trans_a} : tensor<4x6xf32>, tensor<4x6xf32>
    %dr0a = px.gemm %dh1, %w1 : tensor<4x6xf32>, tensor<6x6xf32>
    %dr0 = px.add %dr0a, %ds : tensor<4x6xf32>, tensor<4x6xf32>
    %sq = px.mul %r0, %r0 : tensor<4x6xf32>, tensor<4x6xf32>
    %dt = px.sub %one, %sq : tensor<f32>, tensor<4x6xf32>
    %dh0 = px.mul %dr0, %dt : tensor<4x6xf32>, tensor<4x6xf32>
    %dw0 = px.gemm %dh0, %x {trans_a} : tensor<4x6xf32>, tensor<4x6xf32>
    px.gradient %w0, %dw0 : tensor<6x6xf32>, tensor<6x6xf32>
    px.gradient %w1, %dw1 : tensor<6x6xf32>, tensor<6x6xf32>
    px.gradient %w2, %dw2 : tensor<2x6xf32>, tensor<2x6xf32>
    return %y : tensor<4x2xf32>
  }
}
