// Round trip of the recurrent layers (px.lstm, px.gru) and their backward
// kernels. Each function returns results with explicit types, so a wrong
// shape rule fails verification of the func.return.
// RUN: parallax-opt %s | parallax-opt | FileCheck %s
// RUN: parallax-opt %s --mlir-print-op-generic | parallax-opt | FileCheck %s

// CHECK-LABEL: func.func @lstm
func.func @lstm(%x: tensor<5x2x3xf32>, %w: tensor<1x16x3xf32>,
                %r: tensor<1x16x4xf32>, %b: tensor<1x32xf32>,
                %h: tensor<1x2x4xf32>, %c: tensor<1x2x4xf32>)
    -> (tensor<5x1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>,
        tensor<1x5x2x16xf32>, tensor<1x5x2x4xf32>) {
  // CHECK: px.lstm %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : tensor<5x2x3xf32>, tensor<1x16x3xf32>, tensor<1x16x4xf32>, tensor<1x32xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>
  %y, %y_h, %y_c, %gates, %cells = px.lstm %x, %w, %r, %b, %h, %c
      : tensor<5x2x3xf32>, tensor<1x16x3xf32>, tensor<1x16x4xf32>, tensor<1x32xf32>,
        tensor<1x2x4xf32>, tensor<1x2x4xf32>
  return %y, %y_h, %y_c, %gates, %cells : tensor<5x1x2x4xf32>, tensor<1x2x4xf32>,
      tensor<1x2x4xf32>, tensor<1x5x2x16xf32>, tensor<1x5x2x4xf32>
}

// CHECK-LABEL: func.func @lstm_bidirectional
func.func @lstm_bidirectional(%x: tensor<4x3x2xf64>, %w: tensor<2x20x2xf64>,
                              %r: tensor<2x20x5xf64>, %b: tensor<2x40xf64>,
                              %s: tensor<2x3x5xf64>)
    -> (tensor<4x2x3x5xf64>, tensor<2x3x5xf64>, tensor<2x4x3x20xf64>,
        tensor<2x4x3x5xf64>) {
  // CHECK: px.lstm {{.*}} {direction = "bidirectional"} : tensor<4x3x2xf64>, tensor<2x20x2xf64>, tensor<2x20x5xf64>, tensor<2x40xf64>, tensor<2x3x5xf64>, tensor<2x3x5xf64>
  %y, %y_h, %y_c, %gates, %cells = px.lstm %x, %w, %r, %b, %s, %s {direction = "bidirectional"}
      : tensor<4x3x2xf64>, tensor<2x20x2xf64>, tensor<2x20x5xf64>, tensor<2x40xf64>,
        tensor<2x3x5xf64>, tensor<2x3x5xf64>
  return %y, %y_c, %gates, %cells : tensor<4x2x3x5xf64>, tensor<2x3x5xf64>,
      tensor<2x4x3x20xf64>, tensor<2x4x3x5xf64>
}

// CHECK-LABEL: func.func @gru
func.func @gru(%x: tensor<5x2x3xf32>, %w: tensor<1x12x3xf32>,
               %r: tensor<1x12x4xf32>, %b: tensor<1x24xf32>,
               %h: tensor<1x2x4xf32>)
    -> (tensor<5x1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x5x2x16xf32>,
        tensor<1x2x4xf32>) {
  // CHECK: px.gru %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {linear_before_reset} : tensor<5x2x3xf32>, tensor<1x12x3xf32>, tensor<1x12x4xf32>, tensor<1x24xf32>, tensor<1x2x4xf32>
  %y, %y_h, %gates = px.gru %x, %w, %r, %b, %h {linear_before_reset}
      : tensor<5x2x3xf32>, tensor<1x12x3xf32>, tensor<1x12x4xf32>, tensor<1x24xf32>,
        tensor<1x2x4xf32>
  // CHECK: px.gru {{.*}} {direction = "reverse"} : tensor<5x2x3xf32>,
  %y2, %y_h2, %gates2 = px.gru %x, %w, %r, %b, %h {direction = "reverse"}
      : tensor<5x2x3xf32>, tensor<1x12x3xf32>, tensor<1x12x4xf32>, tensor<1x24xf32>,
        tensor<1x2x4xf32>
  return %y, %y_h, %gates, %y_h2 : tensor<5x1x2x4xf32>, tensor<1x2x4xf32>,
      tensor<1x5x2x16xf32>, tensor<1x2x4xf32>
}

// CHECK-LABEL: func.func @lstm_grad
func.func @lstm_grad(%x: tensor<5x2x3xf32>, %w: tensor<2x16x3xf32>,
                     %r: tensor<2x16x4xf32>, %s: tensor<2x2x4xf32>,
                     %y: tensor<5x2x2x4xf32>, %gates: tensor<2x5x2x16xf32>,
                     %cells: tensor<2x5x2x4xf32>)
    -> (tensor<5x2x3xf32>, tensor<2x16x3xf32>, tensor<2x16x4xf32>,
        tensor<2x32xf32>, tensor<2x2x4xf32>, tensor<2x2x4xf32>) {
  // CHECK: px.lstm_grad {{.*}} {direction = "bidirectional"} : tensor<5x2x3xf32>, tensor<2x16x3xf32>, tensor<2x16x4xf32>, tensor<2x2x4xf32>, tensor<2x2x4xf32>, tensor<5x2x2x4xf32>, tensor<2x5x2x16xf32>, tensor<2x5x2x4xf32>, tensor<5x2x2x4xf32>, tensor<2x2x4xf32>, tensor<2x2x4xf32>
  %dx, %dw, %dr, %db, %dh, %dc = px.lstm_grad %x, %w, %r, %s, %s, %y, %gates, %cells,
      %y, %s, %s {direction = "bidirectional"}
      : tensor<5x2x3xf32>, tensor<2x16x3xf32>, tensor<2x16x4xf32>, tensor<2x2x4xf32>,
        tensor<2x2x4xf32>, tensor<5x2x2x4xf32>, tensor<2x5x2x16xf32>, tensor<2x5x2x4xf32>,
        tensor<5x2x2x4xf32>, tensor<2x2x4xf32>, tensor<2x2x4xf32>
  return %dx, %dw, %dr, %db, %dh, %dc : tensor<5x2x3xf32>, tensor<2x16x3xf32>,
      tensor<2x16x4xf32>, tensor<2x32xf32>, tensor<2x2x4xf32>, tensor<2x2x4xf32>
}

// CHECK-LABEL: func.func @gru_grad
func.func @gru_grad(%x: tensor<5x2x3xf64>, %w: tensor<1x12x3xf64>,
                    %r: tensor<1x12x4xf64>, %h: tensor<1x2x4xf64>,
                    %y: tensor<5x1x2x4xf64>, %gates: tensor<1x5x2x16xf64>)
    -> (tensor<5x2x3xf64>, tensor<1x12x3xf64>, tensor<1x12x4xf64>,
        tensor<1x24xf64>, tensor<1x2x4xf64>) {
  // CHECK: px.gru_grad {{.*}} {linear_before_reset} : tensor<5x2x3xf64>, tensor<1x12x3xf64>, tensor<1x12x4xf64>, tensor<1x2x4xf64>, tensor<5x1x2x4xf64>, tensor<1x5x2x16xf64>, tensor<5x1x2x4xf64>, tensor<1x2x4xf64>
  %dx, %dw, %dr, %db, %dh = px.gru_grad %x, %w, %r, %h, %y, %gates, %y, %h {linear_before_reset}
      : tensor<5x2x3xf64>, tensor<1x12x3xf64>, tensor<1x12x4xf64>, tensor<1x2x4xf64>,
        tensor<5x1x2x4xf64>, tensor<1x5x2x16xf64>, tensor<5x1x2x4xf64>, tensor<1x2x4xf64>
  return %dx, %dw, %dr, %db, %dh : tensor<5x2x3xf64>, tensor<1x12x3xf64>,
      tensor<1x12x4xf64>, tensor<1x24xf64>, tensor<1x2x4xf64>
}

// CHECK-LABEL: func.func @rnn
func.func @rnn(%x: tensor<5x2x3xf32>, %w: tensor<2x4x3xf32>, %r: tensor<2x4x4xf32>,
               %b: tensor<2x8xf32>, %h: tensor<2x2x4xf32>)
    -> (tensor<5x2x2x4xf32>, tensor<2x2x4xf32>, tensor<5x2x3xf32>, tensor<2x8xf32>) {
  // CHECK: px.rnn {{.*}} {activation = "relu", direction = "bidirectional"} : tensor<5x2x3xf32>, tensor<2x4x3xf32>, tensor<2x4x4xf32>, tensor<2x8xf32>, tensor<2x2x4xf32>
  %y, %y_h = px.rnn %x, %w, %r, %b, %h {activation = "relu", direction = "bidirectional"}
      : tensor<5x2x3xf32>, tensor<2x4x3xf32>, tensor<2x4x4xf32>, tensor<2x8xf32>, tensor<2x2x4xf32>
  // CHECK: px.rnn_grad {{.*}} {activation = "relu", direction = "bidirectional"} : tensor<5x2x3xf32>, tensor<2x4x3xf32>, tensor<2x4x4xf32>, tensor<2x2x4xf32>, tensor<5x2x2x4xf32>, tensor<5x2x2x4xf32>, tensor<2x2x4xf32>
  %dx, %dw, %dr, %db, %dh = px.rnn_grad %x, %w, %r, %h, %y, %y, %y_h {activation = "relu", direction = "bidirectional"}
      : tensor<5x2x3xf32>, tensor<2x4x3xf32>, tensor<2x4x4xf32>, tensor<2x2x4xf32>,
        tensor<5x2x2x4xf32>, tensor<5x2x2x4xf32>, tensor<2x2x4xf32>
  return %y, %y_h, %dx, %db : tensor<5x2x2x4xf32>, tensor<2x2x4xf32>, tensor<5x2x3xf32>, tensor<2x8xf32>
}
