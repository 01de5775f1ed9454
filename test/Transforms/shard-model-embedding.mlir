// px-shard-model on a 1 x 2 grid: a trainable table read only through
// row gathers (an embedding) is split by rows over the model axis when its
// rows divide (Megatron-LM's vocabulary-parallel embedding): each rank
// gathers from its block and the partial lookups are all-reduced over the
// model axis; its row-sparse gradient is of the block, with no collective.
// A table whose rows do not divide stays whole, and says why.
// RUN: parallax-opt %s --px-shard-model | FileCheck %s
// The report names the tables px-pad-vocabulary padded (DLRM's 1000000
// rows do not divide by 3: 1000002, split by rows).
// RUN: parallax-opt %models/dlrm.onnx --np 3 --grid=3x1 --report | FileCheck %s --check-prefix=REPORT

// CHECK: %[[IDS:.*]] = px.input "ids" : tensor<3xi64> batched
// CHECK: %[[DY:.*]] = px.input "dy" : tensor<3x4xf32>
// CHECK: %[[EMB:.*]] = px.variable "emb" trainable = dense<5.000000e-01> : tensor<8x4xf32> -> tensor<4x4xf32> {grid = @world, px.layer_split = "rows", split_axes = #shard<axisarray{{\[\[}}1]]>}
// CHECK: %[[ODD:.*]] = px.variable "odd" trainable = dense<5.000000e-01> : tensor<7x4xf32> {px.layer_split = "whole", px.whole_on_grid = "7 rows do not divide over 2 model ranks"}
// CHECK: %[[TIED:.*]] = px.variable "tied" trainable = dense<5.000000e-01> : tensor<8x4xf32>
// CHECK-NOT: whole_on_grid
// CHECK: %[[E:.*]] = px.gather %[[EMB]][%[[IDS]]] block of @world grid_axes = [1] : tensor<4x4xf32>, tensor<3xi64>
// CHECK-NEXT: %[[S:.*]] = px.all_reduce %[[E]] on @world grid_axes = [1] : tensor<3x4xf32>
// CHECK: px.gather %[[ODD]][%[[IDS]]] : tensor<7x4xf32>, tensor<3xi64>
// CHECK: px.gather %[[TIED]][%[[IDS]]] : tensor<8x4xf32>, tensor<3xi64>
// CHECK: %[[G:.*]] = px.make_sparse_grad %[[IDS]], %[[DY]] block of @world grid_axes = [1] : tensor<3xi64>, tensor<3x4xf32> -> !px.sparse_grad<3, tensor<4x4xf32>>
// CHECK-NEXT: px.gradient %[[EMB]], %[[G]] : tensor<4x4xf32>, !px.sparse_grad<3, tensor<4x4xf32>>
// CHECK: px.make_sparse_grad %[[IDS]], %[[DY]] : tensor<3xi64>, tensor<3x4xf32> -> !px.sparse_grad<3, tensor<7x4xf32>>
// CHECK-NOT: px.all_reduce
// CHECK: return %[[S]]

// REPORT: tables.0.weight 333334x16 f32 20.3 MiB gather rows: sparse, <= 128 of 333334 rows/step (alpha <= 0.0004); padded from 1000000x16 to divide over the model ranks
module attributes {px.world_size = 2 : i64, px.ranks_per_machine = 2 : i64, px.model_ranks = 2 : i64} {
  shard.grid @world(shape = 1x2)
  func.func @main() -> (tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>) attributes {px.loss = 0 : i64} {
    %ids = px.input "ids" : tensor<3xi64> batched
    %dy = px.input "dy" : tensor<3x4xf32>
    %t = px.variable "emb" trainable = dense<0.5> : tensor<8x4xf32>
    %u = px.variable "odd" trainable = dense<0.5> : tensor<7x4xf32>
    // Read by a gather and densely (an output projection tied to it): not
    // an embedding of rows alone, so no vocabulary split.
    %w = px.variable "tied" trainable = dense<0.5> : tensor<8x4xf32>
    %e = px.gather %t[%ids] : tensor<8x4xf32>, tensor<3xi64>
    %o = px.gather %u[%ids] : tensor<7x4xf32>, tensor<3xi64>
    %v = px.gather %w[%ids] : tensor<8x4xf32>, tensor<3xi64>
    %p = px.relu %w : tensor<8x4xf32>
    %g = px.make_sparse_grad %ids, %dy : tensor<3xi64>, tensor<3x4xf32> -> !px.sparse_grad<3, tensor<8x4xf32>>
    px.gradient %t, %g : tensor<8x4xf32>, !px.sparse_grad<3, tensor<8x4xf32>>
    %h = px.make_sparse_grad %ids, %dy : tensor<3xi64>, tensor<3x4xf32> -> !px.sparse_grad<3, tensor<7x4xf32>>
    px.gradient %u, %h : tensor<7x4xf32>, !px.sparse_grad<3, tensor<7x4xf32>>
    return %e, %o, %v : tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>
  }
}
