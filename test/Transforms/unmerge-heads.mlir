// px-unmerge-heads: attention written as nn.MultiheadAttention exports it
// (queries, keys and values [T, B, E] = [6, 2, 8] reshaped to [T, B*H, Dh]
// = [6, 4, 4], a key padding mask expanded over the heads and merged the
// same way) runs with the batch and the heads apart ([.., B, H, ..]); the
// reshape that ends the attention reads the unmerged form.
// RUN: parallax-opt %s --split-input-file --px-unmerge-heads --canonicalize | FileCheck %s

// CHECK-LABEL: func.func @attention
// CHECK: %[[Q:.*]] = px.reshape %{{.*}} : tensor<6x2x8xf32> -> tensor<6x2x2x4xf32>
// CHECK: %[[QT:.*]] = px.transpose %[[Q]] {perm = array<i64: 1, 2, 0, 3>} : tensor<6x2x2x4xf32>
// CHECK: %[[K:.*]] = px.reshape %{{.*}} : tensor<6x2x8xf32> -> tensor<6x2x2x4xf32>
// CHECK: %[[KT:.*]] = px.transpose %[[K]] {perm = array<i64: 1, 2, 3, 0>} : tensor<6x2x2x4xf32>
// CHECK: %[[S:.*]] = px.matmul %[[QT]], %[[KT]] : tensor<2x2x6x4xf32>, tensor<2x2x4x6xf32>
// CHECK: %[[M:.*]] = px.add %[[S]], %{{.*}} : tensor<2x2x6x6xf32>, tensor<2x2x1x6xf32>
// CHECK: %[[P:.*]] = px.softmax %[[M]] {axis = 3 : i64} : tensor<2x2x6x6xf32>
// CHECK: %[[C:.*]] = px.matmul %[[P]], %{{.*}} : tensor<2x2x6x6xf32>, tensor<2x2x6x4xf32>
// CHECK: %[[CT:.*]] = px.transpose %[[C]] {perm = array<i64: 2, 0, 1, 3>} : tensor<2x2x6x4xf32>
// CHECK: px.reshape %[[CT]] : tensor<6x2x2x4xf32> -> tensor<12x8xf32>
// CHECK-NOT: tensor<4x6x6xf32>
module attributes {px.model_ranks = 2 : i64} {
  func.func @attention() -> tensor<12x8xf32> attributes {px.loss = 0 : i64} {
    %q = px.input "q" : tensor<6x2x8xf32>
    %k = px.input "k" : tensor<6x2x8xf32>
    %v = px.input "v" : tensor<6x2x8xf32>
    %pad = px.input "pad" : tensor<2x6xi1>
    %ninf = px.constant dense<0xFF800000> : tensor<f32>
    %zeros = px.constant dense<0.0> : tensor<4x1x6xf32>
    %q3 = px.reshape %q : tensor<6x2x8xf32> -> tensor<6x4x4xf32>
    %qt = px.transpose %q3 {perm = array<i64: 1, 0, 2>} : tensor<6x4x4xf32>
    %k3 = px.reshape %k : tensor<6x2x8xf32> -> tensor<6x4x4xf32>
    %kt = px.transpose %k3 {perm = array<i64: 1, 2, 0>} : tensor<6x4x4xf32>
    %v3 = px.reshape %v : tensor<6x2x8xf32> -> tensor<6x4x4xf32>
    %vt = px.transpose %v3 {perm = array<i64: 1, 0, 2>} : tensor<6x4x4xf32>
    %p4 = px.reshape %pad : tensor<2x6xi1> -> tensor<2x1x1x6xi1>
    %pe = px.expand %p4 : tensor<2x1x1x6xi1> -> tensor<2x2x1x6xi1>
    %p3 = px.reshape %pe : tensor<2x2x1x6xi1> -> tensor<4x1x6xi1>
    %mask = px.where %p3, %ninf, %zeros : tensor<4x1x6xi1>, tensor<f32>, tensor<4x1x6xf32>
    %s = px.matmul %qt, %kt : tensor<4x6x4xf32>, tensor<4x4x6xf32>
    %m = px.add %s, %mask : tensor<4x6x6xf32>, tensor<4x1x6xf32>
    %p = px.softmax %m : tensor<4x6x6xf32>
    %c = px.matmul %p, %vt : tensor<4x6x6xf32>, tensor<4x6x4xf32>
    %ct = px.transpose %c {perm = array<i64: 1, 0, 2>} : tensor<4x6x4xf32>
    %o = px.reshape %ct : tensor<6x4x4xf32> -> tensor<12x8xf32>
    return %o : tensor<12x8xf32>
  }
}

// -----

// A merge that reaches no batched product (a flatten before a layer):
// left as it is.
// CHECK-LABEL: func.func @flatten
// CHECK: px.reshape %{{.*}} : tensor<2x3x4xf32> -> tensor<6x4xf32>
// CHECK-NOT: tensor<2x3x4xf32> ->
module attributes {px.model_ranks = 2 : i64} {
  func.func @flatten() -> tensor<6x5xf32> attributes {px.loss = 0 : i64} {
    %x = px.input "x" : tensor<2x3x4xf32>
    %w = px.variable "w" trainable = dense<0.5> : tensor<4x5xf32>
    %f = px.reshape %x : tensor<2x3x4xf32> -> tensor<6x4xf32>
    %y = px.matmul %f, %w : tensor<6x4xf32>, tensor<4x5xf32>
    return %y : tensor<6x5xf32>
  }
}
