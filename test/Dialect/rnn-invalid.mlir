// Every shape-rule error of px.lstm, px.gru and their backward kernels. The
// rules run when the parser infers the result types, so the errors are
// reported at the op as it is parsed.
// RUN: parallax-opt %s --split-input-file --verify-diagnostics

func.func @direction(%x: tensor<5x2x3xf32>, %w: tensor<1x16x3xf32>, %r: tensor<1x16x4xf32>, %b: tensor<1x32xf32>, %h: tensor<1x2x4xf32>, %c: tensor<1x2x4xf32>) {
  // expected-error @+1 {{direction must be forward, reverse or bidirectional, got 'sideways'}}
  %0:5 = px.lstm %x, %w, %r, %b, %h, %c {direction = "sideways"} : tensor<5x2x3xf32>, tensor<1x16x3xf32>, tensor<1x16x4xf32>, tensor<1x32xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>
  return
}

// -----

func.func @x_rank(%x: tensor<5x3xf32>, %w: tensor<1x16x3xf32>, %r: tensor<1x16x4xf32>, %b: tensor<1x32xf32>, %h: tensor<1x2x4xf32>, %c: tensor<1x2x4xf32>) {
  // expected-error @+1 {{x must be [seq_length, batch, input_size], got 5x3}}
  %0:5 = px.lstm %x, %w, %r, %b, %h, %c : tensor<5x3xf32>, tensor<1x16x3xf32>, tensor<1x16x4xf32>, tensor<1x32xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>
  return
}

// -----

func.func @r_rank(%x: tensor<5x2x3xf32>, %w: tensor<1x16x3xf32>, %r: tensor<16x4xf32>, %b: tensor<1x32xf32>, %h: tensor<1x2x4xf32>, %c: tensor<1x2x4xf32>) {
  // expected-error @+1 {{r must be [num_directions, 4*hidden_size, hidden_size], got 16x4}}
  %0:5 = px.lstm %x, %w, %r, %b, %h, %c : tensor<5x2x3xf32>, tensor<1x16x3xf32>, tensor<16x4xf32>, tensor<1x32xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>
  return
}

// -----

func.func @lstm_gate_rows(%x: tensor<5x2x3xf32>, %w: tensor<1x12x3xf32>, %r: tensor<1x12x4xf32>, %b: tensor<1x24xf32>, %h: tensor<1x2x4xf32>, %c: tensor<1x2x4xf32>) {
  // GRU-shaped weights (3 gates) for an LSTM (4).
  // expected-error @+1 {{r must be 1x16x4 (forward, hidden size 4), got 1x12x4}}
  %0:5 = px.lstm %x, %w, %r, %b, %h, %c : tensor<5x2x3xf32>, tensor<1x12x3xf32>, tensor<1x12x4xf32>, tensor<1x24xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>
  return
}

// -----

func.func @gru_gate_rows(%x: tensor<5x2x3xf32>, %w: tensor<1x16x3xf32>, %r: tensor<1x16x4xf32>, %b: tensor<1x24xf32>, %h: tensor<1x2x4xf32>) {
  // expected-error @+1 {{r must be 1x12x4 (forward, hidden size 4), got 1x16x4}}
  %0:3 = px.gru %x, %w, %r, %b, %h : tensor<5x2x3xf32>, tensor<1x16x3xf32>, tensor<1x16x4xf32>, tensor<1x24xf32>, tensor<1x2x4xf32>
  return
}

// -----

func.func @directions(%x: tensor<5x2x3xf32>, %w: tensor<1x16x3xf32>, %r: tensor<2x16x4xf32>, %b: tensor<2x32xf32>, %h: tensor<2x2x4xf32>, %c: tensor<2x2x4xf32>) {
  // expected-error @+1 {{w must be 2x16x3 (bidirectional, hidden size 4), got 1x16x3}}
  %0:5 = px.lstm %x, %w, %r, %b, %h, %c {direction = "bidirectional"} : tensor<5x2x3xf32>, tensor<1x16x3xf32>, tensor<2x16x4xf32>, tensor<2x32xf32>, tensor<2x2x4xf32>, tensor<2x2x4xf32>
  return
}

// -----

func.func @input_size(%x: tensor<5x2x3xf32>, %w: tensor<1x16x2xf32>, %r: tensor<1x16x4xf32>, %b: tensor<1x32xf32>, %h: tensor<1x2x4xf32>, %c: tensor<1x2x4xf32>) {
  // expected-error @+1 {{w must be 1x16x3 (forward, hidden size 4), got 1x16x2}}
  %0:5 = px.lstm %x, %w, %r, %b, %h, %c : tensor<5x2x3xf32>, tensor<1x16x2xf32>, tensor<1x16x4xf32>, tensor<1x32xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>
  return
}

// -----

func.func @element_type(%x: tensor<5x2x3xf32>, %w: tensor<1x16x3xf64>, %r: tensor<1x16x4xf32>, %b: tensor<1x32xf32>, %h: tensor<1x2x4xf32>, %c: tensor<1x2x4xf32>) {
  // expected-error @+1 {{w must have the element type of x ('f32'), got 'f64'}}
  %0:5 = px.lstm %x, %w, %r, %b, %h, %c : tensor<5x2x3xf32>, tensor<1x16x3xf64>, tensor<1x16x4xf32>, tensor<1x32xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>
  return
}

// -----

func.func @bias(%x: tensor<5x2x3xf32>, %w: tensor<1x16x3xf32>, %r: tensor<1x16x4xf32>, %b: tensor<1x16xf32>, %h: tensor<1x2x4xf32>, %c: tensor<1x2x4xf32>) {
  // expected-error @+1 {{b must be 1x32 (forward, hidden size 4), got 1x16}}
  %0:5 = px.lstm %x, %w, %r, %b, %h, %c : tensor<5x2x3xf32>, tensor<1x16x3xf32>, tensor<1x16x4xf32>, tensor<1x16xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>
  return
}

// -----

func.func @initial_h(%x: tensor<5x2x3xf32>, %w: tensor<1x12x3xf32>, %r: tensor<1x12x4xf32>, %b: tensor<1x24xf32>, %h: tensor<1x3x4xf32>) {
  // expected-error @+1 {{initial_h must be 1x2x4 (forward, hidden size 4), got 1x3x4}}
  %0:3 = px.gru %x, %w, %r, %b, %h : tensor<5x2x3xf32>, tensor<1x12x3xf32>, tensor<1x12x4xf32>, tensor<1x24xf32>, tensor<1x3x4xf32>
  return
}

// -----

func.func @initial_c(%x: tensor<5x2x3xf32>, %w: tensor<1x16x3xf32>, %r: tensor<1x16x4xf32>, %b: tensor<1x32xf32>, %h: tensor<1x2x4xf32>, %c: tensor<2x2x4xf32>) {
  // expected-error @+1 {{initial_c must be 1x2x4 (reverse, hidden size 4), got 2x2x4}}
  %0:5 = px.lstm %x, %w, %r, %b, %h, %c {direction = "reverse"} : tensor<5x2x3xf32>, tensor<1x16x3xf32>, tensor<1x16x4xf32>, tensor<1x32xf32>, tensor<1x2x4xf32>, tensor<2x2x4xf32>
  return
}

// -----

func.func @result_type(%x: tensor<5x2x3xf32>, %w: tensor<1x12x3xf32>, %r: tensor<1x12x4xf32>, %b: tensor<1x24xf32>, %h: tensor<1x2x4xf32>) {
  // expected-error @+2 {{'px.gru' op inferred type(s) 'tensor<5x1x2x4xf32>', 'tensor<1x2x4xf32>', 'tensor<1x5x2x16xf32>' are incompatible with return type(s) of operation 'tensor<5x1x2x4xf32>', 'tensor<1x2x4xf32>', 'tensor<1x5x2x12xf32>'}}
  // expected-error @+1 {{'px.gru' op failed to infer returned types}}
  %0:3 = "px.gru"(%x, %w, %r, %b, %h) : (tensor<5x2x3xf32>, tensor<1x12x3xf32>, tensor<1x12x4xf32>, tensor<1x24xf32>, tensor<1x2x4xf32>) -> (tensor<5x1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x5x2x12xf32>)
  return
}

// -----

func.func @grad_saved_gates(%x: tensor<5x2x3xf32>, %w: tensor<1x16x3xf32>, %r: tensor<1x16x4xf32>, %s: tensor<1x2x4xf32>,
                            %y: tensor<5x1x2x4xf32>, %gates: tensor<1x5x2x12xf32>, %cells: tensor<1x5x2x4xf32>) {
  // expected-error @+1 {{gates must be 'tensor<1x5x2x16xf32>' (the forward result's type), got 'tensor<1x5x2x12xf32>'}}
  %0:6 = px.lstm_grad %x, %w, %r, %s, %s, %y, %gates, %cells, %y, %s, %s : tensor<5x2x3xf32>, tensor<1x16x3xf32>, tensor<1x16x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<5x1x2x4xf32>, tensor<1x5x2x12xf32>, tensor<1x5x2x4xf32>, tensor<5x1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>
  return
}

// -----

func.func @grad_dy(%x: tensor<5x2x3xf32>, %w: tensor<1x12x3xf32>, %r: tensor<1x12x4xf32>, %s: tensor<1x2x4xf32>,
                   %y: tensor<5x1x2x4xf32>, %gates: tensor<1x5x2x16xf32>, %dy: tensor<5x2x4xf32>) {
  // expected-error @+1 {{dy must be 'tensor<5x1x2x4xf32>' (the forward result's type), got 'tensor<5x2x4xf32>'}}
  %0:5 = px.gru_grad %x, %w, %r, %s, %y, %gates, %dy, %s : tensor<5x2x3xf32>, tensor<1x12x3xf32>, tensor<1x12x4xf32>, tensor<1x2x4xf32>, tensor<5x1x2x4xf32>, tensor<1x5x2x16xf32>, tensor<5x2x4xf32>, tensor<1x2x4xf32>
  return
}

// -----

func.func @grad_dy_c(%x: tensor<5x2x3xf32>, %w: tensor<2x16x3xf32>, %r: tensor<2x16x4xf32>, %s: tensor<2x2x4xf32>,
                     %y: tensor<5x2x2x4xf32>, %gates: tensor<2x5x2x16xf32>, %cells: tensor<2x5x2x4xf32>,
                     %dc: tensor<1x2x4xf32>) {
  // expected-error @+1 {{dy_c must be 'tensor<2x2x4xf32>' (the forward result's type), got 'tensor<1x2x4xf32>'}}
  %0:6 = px.lstm_grad %x, %w, %r, %s, %s, %y, %gates, %cells, %y, %s, %dc {direction = "bidirectional"} : tensor<5x2x3xf32>, tensor<2x16x3xf32>, tensor<2x16x4xf32>, tensor<2x2x4xf32>, tensor<2x2x4xf32>, tensor<5x2x2x4xf32>, tensor<2x5x2x16xf32>, tensor<2x5x2x4xf32>, tensor<5x2x2x4xf32>, tensor<2x2x4xf32>, tensor<1x2x4xf32>
  return
}

// -----

func.func @grad_forward_rule(%x: tensor<5x2x3xf32>, %w: tensor<1x12x3xf32>, %r: tensor<1x12x4xf32>, %s: tensor<1x3x4xf32>,
                             %y: tensor<5x1x2x4xf32>, %gates: tensor<1x5x2x16xf32>, %dh: tensor<1x2x4xf32>) {
  // The gradient runs the forward op's rule on the forward operands.
  // expected-error @+1 {{initial_h must be 1x2x4 (forward, hidden size 4), got 1x3x4}}
  %0:5 = px.gru_grad %x, %w, %r, %s, %y, %gates, %y, %dh : tensor<5x2x3xf32>, tensor<1x12x3xf32>, tensor<1x12x4xf32>, tensor<1x3x4xf32>, tensor<5x1x2x4xf32>, tensor<1x5x2x16xf32>, tensor<5x1x2x4xf32>, tensor<1x2x4xf32>
  return
}

// -----

func.func @rnn_activation(%x: tensor<5x2x3xf32>, %w: tensor<1x4x3xf32>, %r: tensor<1x4x4xf32>, %b: tensor<1x8xf32>, %h: tensor<1x2x4xf32>) {
  // expected-error @+1 {{activation must be tanh or relu, got 'sigmoid'}}
  %0:2 = px.rnn %x, %w, %r, %b, %h {activation = "sigmoid"} : tensor<5x2x3xf32>, tensor<1x4x3xf32>, tensor<1x4x4xf32>, tensor<1x8xf32>, tensor<1x2x4xf32>
  return
}

// -----

func.func @rnn_r(%x: tensor<5x2x3xf32>, %w: tensor<1x4x3xf32>, %r: tensor<4x4xf32>, %b: tensor<1x8xf32>, %h: tensor<1x2x4xf32>) {
  // expected-error @+1 {{r must be [num_directions, hidden_size, hidden_size], got 4x4}}
  %0:2 = px.rnn %x, %w, %r, %b, %h : tensor<5x2x3xf32>, tensor<1x4x3xf32>, tensor<4x4xf32>, tensor<1x8xf32>, tensor<1x2x4xf32>
  return
}

// -----

func.func @rnn_bias(%x: tensor<5x2x3xf32>, %w: tensor<1x4x3xf32>, %r: tensor<1x4x4xf32>, %b: tensor<1x4xf32>, %h: tensor<1x2x4xf32>) {
  // expected-error @+1 {{b must be 1x8 (forward, hidden size 4), got 1x4}}
  %0:2 = px.rnn %x, %w, %r, %b, %h : tensor<5x2x3xf32>, tensor<1x4x3xf32>, tensor<1x4x4xf32>, tensor<1x4xf32>, tensor<1x2x4xf32>
  return
}

// -----

func.func @rnn_grad_dy_h(%x: tensor<5x2x3xf32>, %w: tensor<1x4x3xf32>, %r: tensor<1x4x4xf32>, %h: tensor<1x2x4xf32>, %y: tensor<5x1x2x4xf32>, %dh: tensor<2x4xf32>) {
  // expected-error @+1 {{dy_h must be 'tensor<1x2x4xf32>' (the forward result's type), got 'tensor<2x4xf32>'}}
  %0:5 = px.rnn_grad %x, %w, %r, %h, %y, %y, %dh : tensor<5x2x3xf32>, tensor<1x4x3xf32>, tensor<1x4x4xf32>, tensor<1x2x4xf32>, tensor<5x1x2x4xf32>, tensor<5x1x2x4xf32>, tensor<2x4xf32>
  return
}
