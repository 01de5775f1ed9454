// px-sync with a table split by vocabulary (px-shard-model's `block of`
// gather) on the parameter servers (--sync-variable on a 2x2 grid): each
// model rank's block of rows is served over the batch axis (grid axis 0),
// and the pull keeps the block (`block of block_axes = [1]`: ids outside it
// read zeros, summed with the other block's by the model axis's
// all-reduce); the pushed gradient is the block's (make_sparse_grad's -1
// rows dropped by the servers). A dense variable is still refused.
// RUN: parallax-opt %s --px-cluster="np=4 model-ranks=2" --px-autodiff --px-shard-model --px-sync="variables=emb=ps" | FileCheck %s
// RUN: not parallax-opt %s --px-cluster="np=4 model-ranks=2" --px-autodiff --px-shard-model --px-sync="variables=w=ps" 2>&1 | FileCheck %s --check-prefix=DENSE

// CHECK: %[[EMB:.*]] = px.variable "emb" trainable = dense<5.000000e-01> : tensor<6x4xf32> -> tensor<3x4xf32> {{.*}}px.sync = "ps"
// CHECK: %[[ROWS:.*]] = px.ps_pull %[[EMB]][%{{.*}}] on @world grid_axes = [0] partitions = 2 placement = [0, 1] block of block_axes = [1] {px.variables = ["emb"]} : tensor<3x4xf32>, tensor<8xi64> -> tensor<8x4xf32>
// CHECK: px.all_reduce %[[ROWS]] on @world grid_axes = [1]
// CHECK: %[[G:.*]] = px.make_sparse_grad {{.*}} block of @world grid_axes = [1] : tensor<8xi64>, tensor<8x4xf32> -> !px.sparse_grad<8, tensor<3x4xf32>>
// CHECK: px.ps_push %[[G]] on @world grid_axes = [0] partitions = 2 placement = [0, 1] local_aggregation {px.variables = ["emb"]} : !px.sparse_grad<8, tensor<3x4xf32>> -> !px.sparse_grad<16, tensor<3x4xf32>>

// DENSE: error: px-sync: variables (--sync-variable): 'w' has a dense gradient: on a grid that splits the model only a row-sparse table goes to the parameter servers
module {
  func.func @main() -> tensor<f32> attributes {px.loss = 0 : i64} {
    %ids = px.input "ids" : tensor<8xi64> batched
    %t = px.variable "emb" trainable = dense<0.5> : tensor<6x4xf32>
    %w = px.variable "w" trainable = dense<0.25> : tensor<4x4xf32>
    %e = px.gather %t[%ids] : tensor<6x4xf32>, tensor<8xi64>
    %h = px.matmul %e, %w : tensor<8x4xf32>, tensor<4x4xf32>
    %r = px.reduce_mean %h {axes = array<i64: 0, 1>, keepdims = false} : tensor<8x4xf32>
    return %r : tensor<f32>
  }
}
