// px-recompute alone on attention (Megatron-LM's selective recomputation):
// the scores, softmax and dropout of [B, heads, T, T] are recomputed in the
// backward pass from the queries and keys, which their own gradients read
// anyway, and from the dropout's kept mask (the dropout's output is its
// input times the mask: px.dropout_grad), just before the softmax's
// gradient; the forward softmax and dropout outputs die after the forward
// pass. The scores' product, read by no backward op, is recomputed because
// the softmax needs it, from the relu of the queries, itself recomputed
// for the queries' gradient and moved before it.
// RUN: parallax-opt %s --px-recompute | FileCheck %s
// Each recomputed op once: two softmax.
// RUN: parallax-opt %s --px-recompute | FileCheck %s --check-prefix=COUNT

// CHECK: %[[S:.*]] = px.matmul %[[Q:.*]], %[[K:.*]] : tensor<2x2x4x3xf32>, tensor<2x2x3x4xf32>
// CHECK-NEXT: %[[P:.*]] = px.softmax %[[S]] : tensor<2x2x4x4xf32>
// CHECK-NEXT: %[[PD:.*]], %[[M:.*]] = px.dropout %[[P]] {ratio = 1.000000e-01 : f32} : tensor<2x2x4x4xf32>
// CHECK-NEXT: px.matmul %[[PD]], %{{.*}} : tensor<2x2x4x4xf32>, tensor<2x2x4x3xf32>
// CHECK: %[[DP:.*]] = px.dropout_grad %{{.*}}, %[[M]] {ratio = 1.000000e-01 : f32}
// CHECK-NEXT: %[[Q2:.*]] = px.relu %{{.*}} {px.recomputed} : tensor<2x2x4x3xf32>
// CHECK-NEXT: %[[S2:.*]] = px.matmul %[[Q2]], %[[K]] {px.recomputed} : tensor<2x2x4x3xf32>, tensor<2x2x3x4xf32>
// CHECK-NEXT: %[[P2:.*]] = px.softmax %[[S2]] {px.recomputed} : tensor<2x2x4x4xf32>
// CHECK-NEXT: %[[DS:.*]] = px.softmax_grad %[[P2]], %[[DP]] : tensor<2x2x4x4xf32>
// CHECK-NEXT: %[[PD2:.*]] = px.dropout_grad %[[P2]], %[[M]] {px.recomputed, ratio = 1.000000e-01 : f32}
// CHECK-NEXT: px.transpose %[[PD2]] {perm = array<i64: 0, 1, 3, 2>}
// COUNT-COUNT-2: px.softmax %
// COUNT-NOT: px.softmax %

module {
  func.func @main() -> tensor<f32> attributes {px.loss = 0 : i64} {
    %q = px.input "q" : tensor<2x2x4x3xf32> batched
    %k = px.input "k" : tensor<2x2x3x4xf32> batched
    %v = px.input "v" : tensor<2x2x4x3xf32> batched
    %dc = px.input "dc" : tensor<2x2x4x3xf32>
    %qr = px.relu %q : tensor<2x2x4x3xf32>
    %s = px.matmul %qr, %k : tensor<2x2x4x3xf32>, tensor<2x2x3x4xf32>
    %p = px.softmax %s : tensor<2x2x4x4xf32>
    %pd, %m = px.dropout %p {ratio = 1.000000e-01 : f32} : tensor<2x2x4x4xf32>
    %c = px.matmul %pd, %v : tensor<2x2x4x4xf32>, tensor<2x2x4x3xf32>
    %l = px.reduce_sum %c {axes = array<i64: 0, 1, 2, 3>, keepdims = false} : tensor<2x2x4x3xf32>
    %vt = px.transpose %v {perm = array<i64: 0, 1, 3, 2>} : tensor<2x2x4x3xf32>
    %dpd = px.matmul %dc, %vt : tensor<2x2x4x3xf32>, tensor<2x2x3x4xf32>
    %dp = px.dropout_grad %dpd, %m {ratio = 1.000000e-01 : f32} : tensor<2x2x4x4xf32>, tensor<2x2x4x4xi1>
    %ds = px.softmax_grad %p, %dp : tensor<2x2x4x4xf32>
    %pdt = px.transpose %pd {perm = array<i64: 0, 1, 3, 2>} : tensor<2x2x4x4xf32>
    %dv = px.matmul %pdt, %dc : tensor<2x2x4x4xf32>, tensor<2x2x4x3xf32>
    %kt = px.transpose %k {perm = array<i64: 0, 1, 3, 2>} : tensor<2x2x3x4xf32>
    %dq = px.matmul %ds, %kt : tensor<2x2x4x4xf32>, tensor<2x2x4x3xf32>
    %qt = px.transpose %qr {perm = array<i64: 0, 1, 3, 2>} : tensor<2x2x4x3xf32>
    %dk = px.matmul %qt, %ds : tensor<2x2x3x4xf32>, tensor<2x2x4x4xf32>
    return %l : tensor<f32>
  }
}
