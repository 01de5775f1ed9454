// A block of a split variable (what shard-partition makes of a weight split
// by rows), for variable-block-invalid.mlir's plan check.
module attributes {px.world_size = 2 : i64} {
  shard.grid @g(shape = 2)
  func.func @main() -> tensor<16x16xf32> {
    %w = px.variable "w" trainable = dense<1.0> : tensor<32x16xf32> -> tensor<16x16xf32> {grid = @g, split_axes = #shard<axisarray[[0]]>}
    return %w : tensor<16x16xf32>
  }
}
