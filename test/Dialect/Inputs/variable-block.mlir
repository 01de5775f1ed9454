// An uneven block of a split variable (5 rows over 2 ranks: shard makes blocks of 2), for
// variable-block-invalid.mlir's plan check.
module attributes {px.world_size = 2 : i64} {
  shard.grid @g(shape = 2)
  func.func @main() -> tensor<2x16xf32> {
    %w = px.variable "w" trainable = dense<1.0> : tensor<5x16xf32> -> tensor<2x16xf32> {grid = @g, split_axes = #shard<axisarray[[0]]>}
    return %w : tensor<2x16xf32>
  }
}
