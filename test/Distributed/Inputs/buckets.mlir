// Two all-reduce buckets for bucket-in-place.test: bucket 0's %a is read
// again after the collective (by the add), so it leaves for a staged
// bucket of its own and %b goes in place; bucket 1's gradients are read by nothing else and go in
// place.
module attributes {px.world_size = 2 : i64} {
  shard.grid @world(shape = 2)
  func.func @main() -> (tensor<4xf32>, tensor<3xf32>, tensor<5xf32>, tensor<5xf32>) {
    %x = px.input "x" : tensor<4xf32>
    %y = px.input "y" : tensor<3xf32>
    %z = px.input "z" : tensor<5xf32>
    %a = px.neg %x : tensor<4xf32>
    %b = px.exp %y : tensor<3xf32>
    %ra = px.all_reduce %a on @world reduction = sum bucket = 0 : tensor<4xf32>
    %rb = px.all_reduce %b on @world reduction = sum bucket = 0 : tensor<3xf32>
    %d = px.neg %z : tensor<5xf32>
    %e = px.exp %z : tensor<5xf32>
    %rd = px.all_reduce %d on @world reduction = sum bucket = 1 : tensor<5xf32>
    %re = px.all_reduce %e on @world reduction = sum bucket = 1 : tensor<5xf32>
    %c = px.add %a, %ra : tensor<4xf32>, tensor<4xf32>
    return %c, %rb, %rd, %re : tensor<4xf32>, tensor<3xf32>, tensor<5xf32>, tensor<5xf32>
  }
}
