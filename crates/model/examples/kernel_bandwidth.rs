//! How close the quantised matmul comes to the device's memory bandwidth, one format at a
//! time, printed as one JSON line per case.
//!
//! `cargo run --release -p stampo-cli -p stampo-model --example kernel_bandwidth -- [cpu|wgpu] [MIB]`
//!
//! Decoding multiplies each weight matrix by one token's activations, so its speed is bounded by
//! the bytes of weights read. Each case puts copies of one random matrix on the device until
//! they hold `MIB` MiB (default 512, several times any cache), launches a product with every
//! copy in turn, and reads back the last result: the queue runs in order, so the wall time
//! covers all of them. `gb_s` is weight bytes over that time; `us_per_launch` is the time per
//! product, which for the models' small matrices is the launch cost rather than the bytes.

use std::time::Instant;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use burn::tensor::{Tensor, TensorData};
use stampo_model::quant::{QLinear, QuantFormat, QuantLayout};
use stampo_model::{Device, DeviceKind, Result, to_vec};
use stampo_quant::sample::{Rng, random_matrix};

/// `(rows, cols)`: a large square matrix, then two shapes the default models decode with
/// (the feed-forward down projections of Qwen2.5 and SmolLM2; every format's blocks divide
/// their columns).
const SHAPES: [(usize, usize); 3] = [(4096, 4096), (896, 4864), (576, 1536)];

struct Case {
    format: QuantFormat,
    rows: usize,
    cols: usize,
    tokens: usize,
}

/// Times `case` over copies of one matrix filling `budget` bytes; prints one JSON line.
fn run(device: &Device, device_name: &str, case: &Case, budget: usize) -> Result<()> {
    let Some(row_bytes) = case.format.row_bytes(case.cols) else {
        return Ok(());
    };
    let mut rng = Rng(0x5eed);
    let bytes = random_matrix(case.format, case.rows, case.cols, &mut rng);
    let layout = QuantLayout {
        format: case.format,
        rows: case.rows,
        cols: case.cols,
    };
    let matrix_bytes = row_bytes * case.rows;
    let copies = budget.div_ceil(matrix_bytes).clamp(2, 4096);
    let layers = (0..copies)
        .map(|_| QLinear::from_bytes("bench", &bytes, None, layout, device))
        .collect::<Result<Vec<_>>>()?;
    let x: Vec<f32> = (0..case.tokens * case.cols).map(|_| rng.float()).collect();
    let input = Tensor::<2>::from_data(TensorData::new(x, [case.tokens, case.cols]), device);

    // One pass to compile the kernel and settle the allocations, then timed passes until
    // a quarter of a second has gone by.
    let mut last = None;
    for layer in &layers {
        last = Some(layer.forward(input.clone()));
    }
    if let Some(y) = last.take() {
        to_vec(y)?;
    }
    let mut launches = 0usize;
    let t0 = Instant::now();
    while t0.elapsed().as_secs_f64() < 0.25 {
        for layer in &layers {
            last = Some(layer.forward(input.clone()));
        }
        if let Some(y) = last.take() {
            to_vec(y)?;
        }
        launches += layers.len();
    }
    let seconds = t0.elapsed().as_secs_f64();
    let per_launch = seconds / launches as f64;
    println!(
        "{{\"device\":{device_name:?},\"format\":{:?},\"rows\":{},\"cols\":{},\"tokens\":{},\"matrix_bytes\":{matrix_bytes},\"copies\":{copies},\"launches\":{launches},\"us_per_launch\":{:.2},\"gb_s\":{:.1},\"gflop_s\":{:.1}}}",
        case.format.name(),
        case.rows,
        case.cols,
        case.tokens,
        per_launch * 1e6,
        matrix_bytes as f64 / per_launch / 1e9,
        2.0 * (case.rows * case.cols * case.tokens) as f64 / per_launch / 1e9,
    );
    Ok(())
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let kind = DeviceKind::parse(args.get(1).map_or("wgpu", String::as_str))?;
    let budget_mib: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(512);
    let device = kind.device()?;
    let device_name = format!("{kind:?}").to_lowercase();
    for (rows, cols) in SHAPES {
        for format in QuantFormat::ALL {
            let case = Case {
                format,
                rows,
                cols,
                tokens: 1,
            };
            run(&device, &device_name, &case, budget_mib << 20)?;
        }
    }
    // A prefill-sized batch on the large matrix: arithmetic rather than bytes.
    for format in QuantFormat::ALL {
        let case = Case {
            format,
            rows: 4096,
            cols: 4096,
            tokens: 128,
        };
        run(&device, &device_name, &case, budget_mib << 20)?;
    }
    Ok(())
}
