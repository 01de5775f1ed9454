// px-recompute alone: the relu's result, read by the forward product and
// by fc2's weight gradient, is recomputed from fc1's output (which the
// relu's own gradient reads anyway) just before that gradient, so that the
// forward result dies after the forward pass. The other element-wise ops
// (greater, where) are the backward pass's own.
// RUN: parallax-opt %s --px-recompute | FileCheck %s
// One clone, no more: the relu appears twice.
// RUN: parallax-opt %s --px-recompute | FileCheck %s --check-prefix=COUNT

// CHECK: %[[H:.*]] = px.gemm %{{.*}}, %{{.*}} {trans_b} : tensor<4x8xf32>, tensor<6x8xf32>
// CHECK-NEXT: %[[R:.*]] = px.relu %[[H]] : tensor<4x6xf32>
// CHECK-NEXT: %[[Y:.*]] = px.gemm %[[R]], %{{.*}} {trans_b} : tensor<4x6xf32>, tensor<2x6xf32>
// CHECK: %[[R2:.*]] = px.relu %[[H]] {px.recomputed} : tensor<4x6xf32>
// CHECK-NEXT: px.gemm %{{.*}}, %[[R2]] {trans_a} : tensor<4x2xf32>, tensor<4x6xf32>
// CHECK: return %[[Y]]
// COUNT-COUNT-2: px.relu
// COUNT-NOT: px.relu

module {
  func.func @main() -> tensor<4x2xf32> attributes {px.loss = 0 : i64} {
    %x = px.input "x" : tensor<4x8xf32> batched
    %dy = px.input "dy" : tensor<4x2xf32>
    %w1 = px.variable "fc1.weight" trainable = dense<0.1> : tensor<6x8xf32>
    %w2 = px.variable "fc2.weight" trainable = dense<0.2> : tensor<2x6xf32>
    %h = px.gemm %x, %w1 {trans_b} : tensor<4x8xf32>, tensor<6x8xf32>
    %r = px.relu %h : tensor<4x6xf32>
    %y = px.gemm %r, %w2 {trans_b} : tensor<4x6xf32>, tensor<2x6xf32>
    %dr = px.gemm %dy, %w2 : tensor<4x2xf32>, tensor<2x6xf32>
    %dw2 = px.gemm %dy, %r {trans_a} : tensor<4x2xf32>, tensor<4x6xf32>
    %zero = px.constant dense<0.0> : tensor<f32>
    %pos = px.greater %h, %zero : tensor<4x6xf32>, tensor<f32>
    %dh = px.where %pos, %dr, %zero : tensor<4x6xi1>, tensor<4x6xf32>, tensor<f32>
    %dw1 = px.gemm %dh, %x {trans_a} : tensor<4x6xf32>, tensor<4x8xf32>
    px.gradient %w1, %dw1 : tensor<6x8xf32>, tensor<6x8xf32>
    px.gradient %w2, %dw2 : tensor<2x6xf32>, tensor<2x6xf32>
    return %y : tensor<4x2xf32>
  }
}
