// px-shard-model's pairing rule follows the dimension a split of features
// is on. fc1 splits by output features (its last dimension, 6 over 2
// ranks); a reshape that merges the tokens and features ([2, 4, 6] ->
// [2, 24]) leaves that split inside the merged dimension, not as a block of
// it, so fc2, which reads the merged dimension, is not paired with fc1 (its
// input features would be another block than fc1's): it splits by output
// features too, and fc1's output is gathered before the reshape. (Paired,
// as before the rule followed dimensions, propagation gathered fc1's
// weight instead: fc1 computed whole on every rank.)
// In @kept a reshape that keeps the features leading ([2, 4, 6] ->
// [8, 6]) carries the split, and fc2 splits by input features as paired.
// RUN: parallax-opt %s --split-input-file --px-shard-model | FileCheck %s

// CHECK-LABEL: func.func @merged
// CHECK-DAG: px.variable "fc1.weight" {{.*}} px.layer_split = "out"
// CHECK-DAG: px.variable "fc2.weight" {{.*}} px.layer_split = "out"
// CHECK: px.all_gather
module attributes {px.world_size = 2 : i64, px.ranks_per_machine = 2 : i64, px.model_ranks = 2 : i64} {
  shard.grid @world(shape = 1x2)
  func.func @merged() -> tensor<2x4xf32> attributes {px.loss = 0 : i64} {
    %x = px.input "x" : tensor<2x4x8xf32> batched
    %w1 = px.variable "fc1.weight" trainable = dense<0.1> : tensor<8x6xf32>
    %w2 = px.variable "fc2.weight" trainable = dense<0.2> : tensor<4x24xf32>
    %h = px.matmul %x, %w1 : tensor<2x4x8xf32>, tensor<8x6xf32>
    %r = px.relu %h : tensor<2x4x6xf32>
    %f = px.reshape %r : tensor<2x4x6xf32> -> tensor<2x24xf32>
    %y = px.gemm %f, %w2 {trans_b} : tensor<2x24xf32>, tensor<4x24xf32>
    return %y : tensor<2x4xf32>
  }
}

// -----

// CHECK-LABEL: func.func @kept
// CHECK-DAG: px.variable "fc1.weight" {{.*}} px.layer_split = "out"
// CHECK-DAG: px.variable "fc2.weight" {{.*}} px.layer_split = "in"
// CHECK-NOT: px.all_gather
module attributes {px.world_size = 2 : i64, px.ranks_per_machine = 2 : i64, px.model_ranks = 2 : i64} {
  shard.grid @world(shape = 1x2)
  func.func @kept() -> tensor<8x4xf32> attributes {px.loss = 0 : i64} {
    %x = px.input "x" : tensor<2x4x8xf32> batched
    %w1 = px.variable "fc1.weight" trainable = dense<0.1> : tensor<8x6xf32>
    %w2 = px.variable "fc2.weight" trainable = dense<0.2> : tensor<4x6xf32>
    %h = px.matmul %x, %w1 : tensor<2x4x8xf32>, tensor<8x6xf32>
    %r = px.relu %h : tensor<2x4x6xf32>
    %f = px.reshape %r : tensor<2x4x6xf32> -> tensor<8x6xf32>
    %y = px.gemm %f, %w2 {trans_b} : tensor<8x6xf32>, tensor<4x6xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// The features as 3 heads of 2 on the way: 2 model ranks do not divide the
// heads, so the split would be gathered there; fc2 is not paired.
// CHECK-LABEL: func.func @heads
// CHECK-DAG: px.variable "fc1.weight" {{.*}} px.layer_split = "out"
// CHECK-DAG: px.variable "fc2.weight" {{.*}} px.layer_split = "out"
module attributes {px.world_size = 2 : i64, px.ranks_per_machine = 2 : i64, px.model_ranks = 2 : i64} {
  shard.grid @world(shape = 1x2)
  func.func @heads() -> tensor<8x4xf32> attributes {px.loss = 0 : i64} {
    %x = px.input "x" : tensor<2x4x8xf32> batched
    %w1 = px.variable "fc1.weight" trainable = dense<0.1> : tensor<8x6xf32>
    %w2 = px.variable "fc2.weight" trainable = dense<0.2> : tensor<4x6xf32>
    %h = px.matmul %x, %w1 : tensor<2x4x8xf32>, tensor<8x6xf32>
    %a = px.reshape %h : tensor<2x4x6xf32> -> tensor<2x4x3x2xf32>
    %b = px.reshape %a : tensor<2x4x3x2xf32> -> tensor<8x6xf32>
    %y = px.gemm %b, %w2 {trans_b} : tensor<8x6xf32>, tensor<4x6xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// A grouped convolution (2 groups) between two convolutions: on 2 model
// ranks each holds one group, so conv1's output channels reach conv3's
// input channels through it (ResNeXt's bottleneck, split Megatron-style)
// and the grouped convolution runs on the rank's group, nothing gathered.
// CHECK-LABEL: func.func @grouped
// CHECK-DAG: px.variable "conv1.weight" {{.*}} px.layer_split = "out"
// CHECK-DAG: px.variable "conv3.weight" {{.*}} px.layer_split = "in"
// CHECK-NOT: px.all_gather
// CHECK: px.conv %{{.*}}, %{{.*}} {{{.*}}} : tensor<2x4x4x4xf32>, tensor<4x4x3x3xf32>
module attributes {px.world_size = 2 : i64, px.ranks_per_machine = 2 : i64, px.model_ranks = 2 : i64} {
  shard.grid @world(shape = 1x2)
  func.func @grouped() -> tensor<2x4x4x4xf32> attributes {px.loss = 0 : i64} {
    %x = px.input "x" : tensor<2x3x4x4xf32> batched
    %w1 = px.variable "conv1.weight" trainable = dense<0.1> : tensor<8x3x1x1xf32>
    %w2 = px.variable "conv2.weight" trainable = dense<0.2> : tensor<8x4x3x3xf32>
    %w3 = px.variable "conv3.weight" trainable = dense<0.3> : tensor<4x8x1x1xf32>
    %a = px.conv %x, %w1 {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : tensor<2x3x4x4xf32>, tensor<8x3x1x1xf32>
    %r = px.relu %a : tensor<2x8x4x4xf32>
    %b = px.conv %r, %w2 {dilations = array<i64: 1, 1>, group = 2 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : tensor<2x8x4x4xf32>, tensor<8x4x3x3xf32>
    %r2 = px.relu %b : tensor<2x8x4x4xf32>
    %c = px.conv %r2, %w3 {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : tensor<2x8x4x4xf32>, tensor<4x8x1x1xf32>
    return %c : tensor<2x4x4x4xf32>
  }
}

// -----

// The same on 4 model ranks would cut each group in two: conv3 is not
// paired, and the grouped convolution runs whole on conv1's gathered
// output.
// CHECK-LABEL: func.func @grouped_through
// CHECK-DAG: px.variable "conv1.weight" {{.*}} px.layer_split = "out"
// CHECK-DAG: px.variable "conv3.weight" {{.*}} px.layer_split = "out"
// CHECK: px.all_gather
// CHECK: px.conv %{{.*}}, %{{.*}} {{{.*}}group = 2 {{.*}}} : tensor<2x8x4x4xf32>, tensor<8x4x3x3xf32>
module attributes {px.world_size = 4 : i64, px.ranks_per_machine = 4 : i64, px.model_ranks = 4 : i64} {
  shard.grid @world(shape = 1x4)
  func.func @grouped_through() -> tensor<2x4x4x4xf32> attributes {px.loss = 0 : i64} {
    %x = px.input "x" : tensor<2x3x4x4xf32> batched
    %w1 = px.variable "conv1.weight" trainable = dense<0.1> : tensor<8x3x1x1xf32>
    %w2 = px.variable "conv2.weight" trainable = dense<0.2> : tensor<8x4x3x3xf32>
    %w3 = px.variable "conv3.weight" trainable = dense<0.3> : tensor<4x8x1x1xf32>
    %a = px.conv %x, %w1 {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : tensor<2x3x4x4xf32>, tensor<8x3x1x1xf32>
    %r = px.relu %a : tensor<2x8x4x4xf32>
    %b = px.conv %r, %w2 {dilations = array<i64: 1, 1>, group = 2 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : tensor<2x8x4x4xf32>, tensor<8x4x3x3xf32>
    %r2 = px.relu %b : tensor<2x8x4x4xf32>
    %c = px.conv %r2, %w3 {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : tensor<2x8x4x4xf32>, tensor<4x8x1x1xf32>
    return %c : tensor<2x4x4x4xf32>
  }
}

// -----

// A layer norm written out (element-wise ops and a mean over the features,
// as torch.onnx.export writes nn.LayerNorm below opset 17) keeps proj's
// split of output features, its mean all-reduced. fc1 widens the features
// (8 to 16) and fc2 would take fc1's output split by input features, so
// fc1 does not pair with proj (which would all-reduce fc1's 16 features
// and leave fc2 to start over): it splits by output features, its input
// gathered, and fc2 by input features (Megatron-LM's MLP).
// CHECK-LABEL: func.func @widening
// CHECK-DAG: px.variable "proj.weight" {{.*}} px.layer_split = "out"
// CHECK-DAG: px.variable "fc1.weight" {{.*}} px.layer_split = "out"
// CHECK-DAG: px.variable "fc2.weight" {{.*}} px.layer_split = "in"
module attributes {px.world_size = 2 : i64, px.ranks_per_machine = 2 : i64, px.model_ranks = 2 : i64} {
  shard.grid @world(shape = 1x2)
  func.func @widening() -> tensor<2x4x8xf32> attributes {px.loss = 0 : i64} {
    %x = px.input "x" : tensor<2x4x8xf32> batched
    %wp = px.variable "proj.weight" trainable = dense<0.1> : tensor<8x8xf32>
    %w1 = px.variable "fc1.weight" trainable = dense<0.2> : tensor<8x16xf32>
    %w2 = px.variable "fc2.weight" trainable = dense<0.3> : tensor<16x8xf32>
    %p = px.matmul %x, %wp : tensor<2x4x8xf32>, tensor<8x8xf32>
    %s = px.add %p, %x : tensor<2x4x8xf32>, tensor<2x4x8xf32>
    %m = px.reduce_mean %s {axes = array<i64: 2>} : tensor<2x4x8xf32>
    %c = px.sub %s, %m : tensor<2x4x8xf32>, tensor<2x4x1xf32>
    %h = px.matmul %c, %w1 : tensor<2x4x8xf32>, tensor<8x16xf32>
    %r = px.relu %h : tensor<2x4x16xf32>
    %y = px.matmul %r, %w2 : tensor<2x4x16xf32>, tensor<16x8xf32>
    return %y : tensor<2x4x8xf32>
  }
}

// -----

// The same without fc2: nothing takes fc1's output split, so fc1 pairs
// with proj.
// CHECK-LABEL: func.func @widening_last
// CHECK-DAG: px.variable "proj.weight" {{.*}} px.layer_split = "out"
// CHECK-DAG: px.variable "fc1.weight" {{.*}} px.layer_split = "in"
module attributes {px.world_size = 2 : i64, px.ranks_per_machine = 2 : i64, px.model_ranks = 2 : i64} {
  shard.grid @world(shape = 1x2)
  func.func @widening_last() -> tensor<2x4x16xf32> attributes {px.loss = 0 : i64} {
    %x = px.input "x" : tensor<2x4x8xf32> batched
    %wp = px.variable "proj.weight" trainable = dense<0.1> : tensor<8x8xf32>
    %w1 = px.variable "fc1.weight" trainable = dense<0.2> : tensor<8x16xf32>
    %p = px.matmul %x, %wp : tensor<2x4x8xf32>, tensor<8x8xf32>
    %m = px.reduce_mean %p {axes = array<i64: 2>} : tensor<2x4x8xf32>
    %c = px.sub %p, %m : tensor<2x4x8xf32>, tensor<2x4x1xf32>
    %h = px.matmul %c, %w1 : tensor<2x4x8xf32>, tensor<8x16xf32>
    return %h : tensor<2x4x16xf32>
  }
}
