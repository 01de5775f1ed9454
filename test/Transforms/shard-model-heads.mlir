// px-shard-model alone on a transformer's attention (Megatron-LM): the
// query, key and value projections split by output features and the output
// projection, whose input comes from them through the reshapes to heads,
// the transposes, the scores' product, softmax, dropout and the context's
// product, by input features. Those ops run on each rank's head with no
// collective between the projections; the only one is the all-reduce of
// the output projection's partial products. The query's bias add lists the
// bias first, as torch.onnx.export writes it: the trace follows the
// activation. The dropout on a block of heads records it (split_dim 1).
// RUN: parallax-opt %s --px-shard-model | FileCheck %s

// CHECK-DAG: px.variable "q.weight" {{.*}} -> tensor<4x8xf32> {grid = @world, px.layer_split = "out", split_axes = #shard<axisarray{{\[\[}}1]]>}
// CHECK-DAG: px.variable "q.bias" {{.*}} -> tensor<4xf32> {grid = @world, split_axes = #shard<axisarray{{\[\[}}1]]>}
// CHECK-DAG: px.variable "k.weight" {{.*}} -> tensor<4x8xf32> {grid = @world, px.layer_split = "out", split_axes = #shard<axisarray{{\[\[}}1]]>}
// CHECK-DAG: px.variable "v.weight" {{.*}} -> tensor<4x8xf32> {grid = @world, px.layer_split = "out", split_axes = #shard<axisarray{{\[\[}}1]]>}
// CHECK-DAG: px.variable "o.weight" {{.*}} -> tensor<8x4xf32> {grid = @world, px.layer_split = "in", split_axes = #shard<axisarray{{\[\[}}], [1]]>}
// CHECK-NOT: px.all_gather
// CHECK: px.reshape %{{.*}} : tensor<2x4x4xf32> -> tensor<2x4x1x4xf32>
// CHECK: px.softmax %{{.*}} : tensor<2x1x4x4xf32>
// CHECK-NEXT: px.dropout %{{.*}} {grid = @world, grid_axes = array<i16: 1>, ratio = 1.000000e-01 : f32, split_dim = 1 : i64} : tensor<2x1x4x4xf32>
// CHECK: px.reshape %{{.*}} : tensor<2x4x1x4xf32> -> tensor<2x4x4xf32>
// CHECK-NEXT: %[[P:.*]] = px.matmul %{{.*}}, %{{.*}} : tensor<2x4x4xf32>, tensor<4x8xf32>
// CHECK-NEXT: %[[Y:.*]] = px.all_reduce %[[P]] on @world grid_axes = [1] : tensor<2x4x8xf32>
// CHECK-NEXT: return %[[Y]]
// CHECK-NOT: px.all_gather

module attributes {px.world_size = 2 : i64, px.ranks_per_machine = 2 : i64, px.model_ranks = 2 : i64} {
  shard.grid @world(shape = 1x2)
  func.func @main() -> tensor<2x4x8xf32> attributes {px.loss = 0 : i64} {
    %x = px.input "x" : tensor<2x4x8xf32> batched
    %wq = px.variable "q.weight" trainable = dense<0.1> : tensor<8x8xf32>
    %wk = px.variable "k.weight" trainable = dense<0.2> : tensor<8x8xf32>
    %wv = px.variable "v.weight" trainable = dense<0.3> : tensor<8x8xf32>
    %wo = px.variable "o.weight" trainable = dense<0.4> : tensor<8x8xf32>
    %wqt = px.transpose %wq {perm = array<i64: 1, 0>} : tensor<8x8xf32>
    %wkt = px.transpose %wk {perm = array<i64: 1, 0>} : tensor<8x8xf32>
    %wvt = px.transpose %wv {perm = array<i64: 1, 0>} : tensor<8x8xf32>
    %wot = px.transpose %wo {perm = array<i64: 1, 0>} : tensor<8x8xf32>
    %bq = px.variable "q.bias" trainable = dense<0.5> : tensor<8xf32>
    %qp = px.matmul %x, %wqt : tensor<2x4x8xf32>, tensor<8x8xf32>
    %q = px.add %bq, %qp : tensor<8xf32>, tensor<2x4x8xf32>
    %k = px.matmul %x, %wkt : tensor<2x4x8xf32>, tensor<8x8xf32>
    %v = px.matmul %x, %wvt : tensor<2x4x8xf32>, tensor<8x8xf32>
    %q4 = px.reshape %q : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
    %k4 = px.reshape %k : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
    %v4 = px.reshape %v : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
    %qh = px.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x2x4xf32>
    %kh = px.transpose %k4 {perm = array<i64: 0, 2, 3, 1>} : tensor<2x4x2x4xf32>
    %vh = px.transpose %v4 {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x2x4xf32>
    %s = px.matmul %qh, %kh : tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>
    %p = px.softmax %s {axis = -1 : i64} : tensor<2x2x4x4xf32>
    %pd, %mask = px.dropout %p {ratio = 1.000000e-01 : f32} : tensor<2x2x4x4xf32>
    %c = px.matmul %pd, %vh : tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>
    %ct = px.transpose %c {perm = array<i64: 0, 2, 1, 3>} : tensor<2x2x4x4xf32>
    %c3 = px.reshape %ct : tensor<2x4x2x4xf32> -> tensor<2x4x8xf32>
    %y = px.matmul %c3, %wot : tensor<2x4x8xf32>, tensor<8x8xf32>
    return %y : tensor<2x4x8xf32>
  }
}
