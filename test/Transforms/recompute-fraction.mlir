// px-recompute's fraction: a segment from the input on. Two relus of equal
// size are read by the backward pass (fc2's and fc3's weight gradients);
// half of their bytes recomputes the first only, a quarter neither, and
// the default both.
// RUN: parallax-opt %s --px-recompute='fraction=0.5' | FileCheck %s --check-prefix=HALF
// RUN: parallax-opt %s --px-recompute='fraction=0.25' | FileCheck %s --check-prefix=NONE
// RUN: parallax-opt %s --px-recompute | FileCheck %s --check-prefix=ALL
// parallax-opt's --recompute-fraction (on a model it compiles): a share, with --recompute.
// RUN: not parallax-opt %models/mlp.onnx --recompute --recompute-fraction 1.5 --emit=none 2>&1 | FileCheck %s --check-prefix=RANGE
// RANGE: error: --recompute-fraction 1.50: expected a share in (0, 1]
// RUN: not parallax-opt %models/mlp.onnx --recompute-fraction 0.5 --emit=none 2>&1 | FileCheck %s --check-prefix=ALONE
// ALONE: error: --recompute-fraction says how much --recompute recomputes: add --recompute

// HALF: %[[R1:.*]] = px.relu %[[H1:.*]] : tensor<4x6xf32>
// HALF: %[[R2:.*]] = px.relu %[[H2:.*]] : tensor<4x6xf32>
// HALF: px.gemm %{{.*}}, %[[R2]] {trans_a} : tensor<4x2xf32>, tensor<4x6xf32>
// HALF: %[[C1:.*]] = px.relu %[[H1]] {px.recomputed} : tensor<4x6xf32>
// HALF-NEXT: px.gemm %{{.*}}, %[[C1]] {trans_a} : tensor<4x6xf32>, tensor<4x6xf32>
// HALF-NOT: px.relu
// NONE-COUNT-2: px.relu
// NONE-NOT: px.relu
// ALL-COUNT-2: px.relu {{.*}}{px.recomputed}
// ALL-NOT: px.relu

module {
  func.func @main() -> tensor<4x2xf32> attributes {px.loss = 0 : i64} {
    %x = px.input "x" : tensor<4x8xf32> batched
    %dy = px.input "dy" : tensor<4x2xf32>
    %w1 = px.variable "fc1.weight" trainable = dense<0.1> : tensor<6x8xf32>
    %w2 = px.variable "fc2.weight" trainable = dense<0.2> : tensor<6x6xf32>
    %w3 = px.variable "fc3.weight" trainable = dense<0.3> : tensor<2x6xf32>
    %h1 = px.gemm %x, %w1 {trans_b} : tensor<4x8xf32>, tensor<6x8xf32>
    %r1 = px.relu %h1 : tensor<4x6xf32>
    %h2 = px.gemm %r1, %w2 {trans_b} : tensor<4x6xf32>, tensor<6x6xf32>
    %r2 = px.relu %h2 : tensor<4x6xf32>
    %y = px.gemm %r2, %w3 {trans_b} : tensor<4x6xf32>, tensor<2x6xf32>
    %zero = px.constant dense<0.0> : tensor<f32>
    %dw3 = px.gemm %dy, %r2 {trans_a} : tensor<4x2xf32>, tensor<4x6xf32>
    %dr2 = px.gemm %dy, %w3 : tensor<4x2xf32>, tensor<2x6xf32>
    %p2 = px.greater %h2, %zero : tensor<4x6xf32>, tensor<f32>
    %dh2 = px.where %p2, %dr2, %zero : tensor<4x6xi1>, tensor<4x6xf32>, tensor<f32>
    %dw2 = px.gemm %dh2, %r1 {trans_a} : tensor<4x6xf32>, tensor<4x6xf32>
    %dr1 = px.gemm %dh2, %w2 : tensor<4x6xf32>, tensor<6x6xf32>
    %p1 = px.greater %h1, %zero : tensor<4x6xf32>, tensor<f32>
    %dh1 = px.where %p1, %dr1, %zero : tensor<4x6xi1>, tensor<4x6xf32>, tensor<f32>
    %dw1 = px.gemm %dh1, %x {trans_a} : tensor<4x6xf32>, tensor<4x8xf32>
    px.gradient %w1, %dw1 : tensor<6x8xf32>, tensor<6x8xf32>
    px.gradient %w2, %dw2 : tensor<6x6xf32>, tensor<6x6xf32>
    px.gradient %w3, %dw3 : tensor<2x6xf32>, tensor<2x6xf32>
    return %y : tensor<4x2xf32>
  }
}
