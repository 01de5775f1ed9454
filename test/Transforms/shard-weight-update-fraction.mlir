// px-shard-weight-update's fraction: ZeRO-1 on a share of the buckets'
// bytes, the largest buckets first until that share is reached. Bucket 0
// holds b (16 bytes, padded to the plan's alignment: 64), bucket 1 w (256
// bytes): 80% of their 320 bytes, or 5%, shards w's bucket only, 81% both.
// RUN: parallax-opt %s --px-shard-weight-update='min-ranks=2 fraction=0.8' | FileCheck %s --check-prefix=LARGEST
// RUN: parallax-opt %s --px-shard-weight-update='min-ranks=2 fraction=0.05' | FileCheck %s --check-prefix=LARGEST
// RUN: parallax-opt %s --px-shard-weight-update='min-ranks=2 fraction=0.81' | FileCheck %s --check-prefix=ALL
// RUN: parallax-opt %s --px-shard-weight-update=min-ranks=2 | FileCheck %s --check-prefix=ALL
// And parallax-opt's option (on a model it compiles): a share in (0, 1].
// RUN: not parallax-opt %models/mlp.onnx --np 4 --shard-weight-update=on --shard-weight-update-fraction 0 --emit=none 2>&1 | FileCheck %s --check-prefix=RANGE
// RANGE: error: --shard-weight-update-fraction 0.00: expected a share in (0, 1]

// LARGEST: px.all_reduce %{{.*}} bucket = 0 {in_place, offset = 0 : i64, px.variables = ["b"]} : tensor<4xf32>
// LARGEST: px.all_reduce %{{.*}} bucket = 1 {in_place, offset = 0 : i64, px.variables = ["w"], shard_bytes = 64 : i64, shard_update}
// LARGEST: px.all_gather_variables %{{.*}} {px.variables = ["w"]}
// LARGEST-NOT: px.all_gather_variables
// ALL-COUNT-2: shard_update
// ALL-COUNT-2: px.all_gather_variables
module attributes {px.world_size = 4 : i64, px.ranks_per_machine = 4 : i64} {
  shard.grid @world(shape = 4)
  func.func @main() -> tensor<f32> attributes {px.loss = 0 : i64} {
    %w = px.variable "w" trainable = dense<1.0> : tensor<8x8xf32>
    %b = px.variable "b" trainable = dense<1.0> : tensor<4xf32>
    %x = px.input "x" : tensor<8x8xf32>
    %y = px.input "y" : tensor<4xf32>
    %l = px.constant dense<0.5> : tensor<f32>
    %gw = px.mul %x, %w : tensor<8x8xf32>, tensor<8x8xf32>
    %gb = px.mul %y, %b : tensor<4xf32>, tensor<4xf32>
    %rb = px.all_reduce %gb on @world grid_axes = [0] reduction = average bucket = 0 {in_place, offset = 0 : i64, px.variables = ["b"]} : tensor<4xf32>
    %rw = px.all_reduce %gw on @world grid_axes = [0] reduction = average bucket = 1 {in_place, offset = 0 : i64, px.variables = ["w"]} : tensor<8x8xf32>
    px.sgd %b, %rb {lr = 0.1 : f64} : tensor<4xf32>, tensor<4xf32>
    px.sgd %w, %rw {lr = 0.1 : f64} : tensor<8x8xf32>, tensor<8x8xf32>
    return %l : tensor<f32>
  }
}
