// px-recompute's `layers` (activation checkpointing): fc1's product runs
// again in the backward pass from its input, which fc1's weight gradient
// reads anyway, just before relu's gradient reads its output; the forward
// output then dies after the forward pass. The cheap ops after it belong
// to its segment, but a residual join of the stream s0 (computed outside
// the segment) ends it: the join s1 stays kept, so that no recomputation
// reaches back through the stream. fraction=0: no other cheap op.
// RUN: parallax-opt %s --px-recompute='fraction=0 layers=fc1.weight' | FileCheck %s
// RUN: parallax-opt %s --px-recompute='fraction=0 layers=fc1.weight' | FileCheck %s --check-prefix=JOIN
// Without the option no product with a weight is recomputed (the cheap
// ops are: tanh).
// RUN: parallax-opt %s --px-recompute | FileCheck %s --check-prefix=NONE
// fc2's output is the loss's: nothing the backward pass reads comes from
// it, and the pass says so.
// RUN: parallax-opt %s --px-recompute='fraction=0 layers=fc2.weight' 2>&1 >/dev/null | FileCheck %s --check-prefix=NOTHING
// NOTHING: warning: px-recompute: layers: 'fc2.weight' frees nothing
// A name that is no layer's weight: the error lists the layers.
// RUN: not parallax-opt %s --px-recompute='layers=fc9.weight' 2>&1 | FileCheck %s --check-prefix=UNKNOWN

// CHECK: %[[S0:.*]] = px.tanh %{{.*}} : tensor<4x6xf32>
// CHECK-NEXT: %[[H1:.*]] = px.gemm %[[S0]], %[[W1:.*]] {trans_b} : tensor<4x6xf32>, tensor<6x6xf32>
// CHECK: %[[DS1:.*]] = px.gemm %{{.*}}, %{{.*}} : tensor<4x2xf32>, tensor<2x6xf32>
// CHECK-NEXT: %[[H1C:.*]] = px.gemm %[[S0]], %[[W1]] {px.recomputed, trans_b} : tensor<4x6xf32>, tensor<6x6xf32>
// CHECK-NEXT: px.greater %[[H1C]], %{{.*}} : tensor<4x6xf32>, tensor<f32>
// JOIN-COUNT-1: px.add
// JOIN-NOT: px.add
// NONE: px.tanh {{.*}}{px.recomputed}
// NONE-NOT: px.gemm {{.*}}px.recomputed
// UNKNOWN: error: px-recompute: layers: no layer's weight is named 'fc9.weight' (the layers: fc1.weight, fc2.weight)

module {
  func.func @main() -> tensor<4x2xf32> attributes {px.loss = 0 : i64} {
    %x = px.input "x" : tensor<4x6xf32> batched
    %dy = px.input "dy" : tensor<4x2xf32>
    %w1 = px.variable "fc1.weight" trainable = dense<0.1> : tensor<6x6xf32>
    %w2 = px.variable "fc2.weight" trainable = dense<0.2> : tensor<2x6xf32>
    %s0 = px.tanh %x : tensor<4x6xf32>
    %h1 = px.gemm %s0, %w1 {trans_b} : tensor<4x6xf32>, tensor<6x6xf32>
    %r1 = px.relu %h1 : tensor<4x6xf32>
    %s1 = px.add %s0, %r1 : tensor<4x6xf32>, tensor<4x6xf32>
    %y = px.gemm %s1, %w2 {trans_b} : tensor<4x6xf32>, tensor<2x6xf32>
    %zero = px.constant dense<0.0> : tensor<f32>
    %dw2 = px.gemm %dy, %s1 {trans_a} : tensor<4x2xf32>, tensor<4x6xf32>
    %ds1 = px.gemm %dy, %w2 : tensor<4x2xf32>, tensor<2x6xf32>
    %p1 = px.greater %h1, %zero : tensor<4x6xf32>, tensor<f32>
    %dh1 = px.where %p1, %ds1, %zero : tensor<4x6xi1>, tensor<4x6xf32>, tensor<f32>
    %dw1 = px.gemm %dh1, %s0 {trans_a} : tensor<4x6xf32>, tensor<4x6xf32>
    px.gradient %w1, %dw1 : tensor<6x6xf32>, tensor<6x6xf32>
    px.gradient %w2, %dw2 : tensor<2x6xf32>, tensor<2x6xf32>
    return %y : tensor<4x2xf32>
  }
}
