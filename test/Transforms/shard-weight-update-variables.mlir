// px-shard-weight-update's variables: ZeRO-1 on the buckets whose every
// member is named (px-sync's sharded-variables buckets them apart). Bucket
// 0 holds b, bucket 1 w, bucket 2 v and w2: naming b shards bucket 0 only,
// naming v alone shards nothing (w2 shares its bucket), naming v and w2
// shards bucket 2. `fraction` and `variables` together are refused.
// RUN: parallax-opt %s --px-shard-weight-update='min-ranks=2 variables=b' | FileCheck %s --check-prefix=B
// RUN: parallax-opt %s --px-shard-weight-update='min-ranks=2 variables=v' | FileCheck %s --check-prefix=NONE
// RUN: parallax-opt %s --px-shard-weight-update='min-ranks=2 variables=v,w2' | FileCheck %s --check-prefix=PAIR
// RUN: parallax-opt %s --px-shard-weight-update='min-ranks=2 variables=v' 2>&1 >/dev/null | FileCheck %s --check-prefix=WARN
// RUN: not parallax-opt %s --px-shard-weight-update='min-ranks=2 variables=b fraction=0.5' 2>&1 | FileCheck %s --check-prefix=BOTH

// B: px.all_reduce %{{.*}} bucket = 0 {in_place, offset = 0 : i64, px.variables = ["b"], shard_bytes = 64 : i64, shard_update}
// B-NOT: shard_update
// B: px.all_gather_variables %{{.*}} {px.variables = ["b"]}
// B-NOT: px.all_gather_variables
// NONE-NOT: shard_update
// NONE-NOT: px.all_gather_variables
// PAIR-COUNT-2: shard_update
// PAIR: px.all_gather_variables %{{.*}} {px.variables = ["v", "w2"]}
// PAIR-NOT: px.all_gather_variables
// WARN: warning: px-shard-weight-update: 'v' is in no bucket whose update can be sharded
// BOTH: error: px-shard-weight-update: give `variables` or `fraction`, not both
module attributes {px.world_size = 4 : i64, px.ranks_per_machine = 4 : i64} {
  shard.grid @world(shape = 4)
  func.func @main() -> tensor<f32> attributes {px.loss = 0 : i64} {
    %w = px.variable "w" trainable = dense<1.0> : tensor<8x8xf32>
    %b = px.variable "b" trainable = dense<1.0> : tensor<4xf32>
    %v = px.variable "v" trainable = dense<1.0> : tensor<4xf32>
    %w2 = px.variable "w2" trainable = dense<1.0> : tensor<4xf32>
    %x = px.input "x" : tensor<8x8xf32>
    %y = px.input "y" : tensor<4xf32>
    %l = px.constant dense<0.5> : tensor<f32>
    %gw = px.mul %x, %w : tensor<8x8xf32>, tensor<8x8xf32>
    %gb = px.mul %y, %b : tensor<4xf32>, tensor<4xf32>
    %gv = px.mul %y, %v : tensor<4xf32>, tensor<4xf32>
    %gw2 = px.mul %y, %w2 : tensor<4xf32>, tensor<4xf32>
    %rb = px.all_reduce %gb on @world grid_axes = [0] reduction = average bucket = 0 {in_place, offset = 0 : i64, px.variables = ["b"]} : tensor<4xf32>
    %rw = px.all_reduce %gw on @world grid_axes = [0] reduction = average bucket = 1 {in_place, offset = 0 : i64, px.variables = ["w"]} : tensor<8x8xf32>
    %rv = px.all_reduce %gv on @world grid_axes = [0] reduction = average bucket = 2 {in_place, offset = 0 : i64, px.variables = ["v"]} : tensor<4xf32>
    %rw2 = px.all_reduce %gw2 on @world grid_axes = [0] reduction = average bucket = 2 {in_place, offset = 64 : i64, px.variables = ["w2"]} : tensor<4xf32>
    px.sgd %b, %rb {lr = 0.1 : f64} : tensor<4xf32>, tensor<4xf32>
    px.sgd %w, %rw {lr = 0.1 : f64} : tensor<8x8xf32>, tensor<8x8xf32>
    px.sgd %v, %rv {lr = 0.1 : f64} : tensor<4xf32>, tensor<4xf32>
    px.sgd %w2, %rw2 {lr = 0.1 : f64} : tensor<4xf32>, tensor<4xf32>
    return %l : tensor<f32>
  }
}
