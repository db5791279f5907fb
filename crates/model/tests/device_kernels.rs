//! The quantised matmul and row lookup on every device against the scalar reference:
//! `stampo-quant`'s dequantisation (bit-identical to ggml's `dequantize_row_*`, checked in that
//! crate) followed by an `f64` dot product, on random blocks of every supported format.
//!
//! The CPU device quantises activations to 8 bits as ggml does, so it is held to the error that
//! implies; the wgpu device computes in `f32` and is held to float reassociation. Without the
//! `wgpu` feature, or on a machine without an adapter, the wgpu cases say so and pass, unless
//! `STAMPO_REQUIRE_WGPU=1` (set by `scripts/test.sh`, whose set-up installs lavapipe) makes a
//! missing adapter a failure. The stacked and gated products are held to the separate ones.

mod common;

use burn::tensor::{Tensor, TensorData};
use common::wgpu_device;
use stampo_model::quant::{QLinear, QuantFormat, QuantLayout};
use stampo_model::{Device, DeviceKind, to_vec};
use stampo_quant::sample::{Rng, random_matrix};
use stampo_quant::unpack::dequantize_row;

const ROWS: usize = 67;
const COLS: usize = 512;
/// More than one tile of the wgpu matmul (8 tokens), the last one partial.
const TOKENS: usize = 11;

/// Every row of the matrix (rows of `cols` values), dequantised by the reference.
fn reference_rows(format: QuantFormat, bytes: &[u8], cols: usize) -> Vec<Vec<f32>> {
    let row_bytes = format.row_bytes(cols).expect("whole blocks");
    bytes
        .chunks_exact(row_bytes)
        .map(|row| {
            let mut out = Vec::new();
            dequantize_row(format, row, cols, &mut out);
            out
        })
        .collect()
}

/// `w · x` in `f64` from the `f32` products, and `Σ|w·x|` (what the tolerances scale with).
fn reference_dot(w: &[f32], x: &[f32]) -> (f64, f64) {
    w.iter()
        .zip(x)
        .fold((0.0, 0.0), |(sum, magnitude), (&a, &b)| {
            let p = f64::from(a * b);
            (sum + p, magnitude + p.abs())
        })
}

/// The matrix as a layer, in parts of 30 rows: the row ranges a large matrix is split into
/// (Gemma 3's embedding) are exercised on every format.
fn layer(format: QuantFormat, bytes: &[u8], device: &Device) -> QLinear {
    let layout = QuantLayout {
        format,
        rows: ROWS,
        cols: COLS,
    };
    let part_bytes = 30 * format.row_bytes(COLS).expect("whole blocks");
    let layer = QLinear::from_bytes_in_parts("test", bytes, None, layout, device, part_bytes)
        .expect("shape matches");
    assert_eq!(layer.parts.len(), 3);
    layer
}

/// `x · Wᵀ` on `device` for every format, within `tolerance(Σ|w·x|, max|x|)` of the reference.
fn check_matmul(device: &Device, name: &str, tolerance: impl Fn(f64, f64) -> f64) {
    let mut rng = Rng(0xdec0de);
    for format in QuantFormat::ALL {
        let bytes = random_matrix(format, ROWS, COLS, &mut rng);
        let x: Vec<f32> = (0..TOKENS * COLS).map(|_| rng.float()).collect();
        let reference = reference_rows(format, &bytes, COLS);
        let input = Tensor::<2>::from_data(TensorData::new(x.clone(), [TOKENS, COLS]), device);
        let got = to_vec(layer(format, &bytes, device).forward(input)).expect("readback");
        assert_eq!(got.len(), TOKENS * ROWS);
        for t in 0..TOKENS {
            let xt = &x[t * COLS..(t + 1) * COLS];
            let max_x = xt.iter().fold(0.0f64, |m, &v| m.max(f64::from(v.abs())));
            for (r, w) in reference.iter().enumerate() {
                let (want, magnitude) = reference_dot(w, xt);
                let got = f64::from(got[t * ROWS + r]);
                let allowed = tolerance(
                    magnitude,
                    max_x * w.iter().map(|v| f64::from(v.abs())).sum::<f64>(),
                );
                assert!(
                    (got - want).abs() <= allowed,
                    "{name} {format} token {t} row {r}: {got} vs {want} (allowed {allowed})"
                );
            }
        }
    }
}

/// Rows `ids` of `W` on `device`, equal to the reference's dequantisation.
fn check_rows(device: &Device, name: &str) {
    let mut rng = Rng(0xface);
    let ids = [5u32, 0, 66, 5, 31, 30, 29, 60];
    for format in QuantFormat::ALL {
        let bytes = random_matrix(format, ROWS, COLS, &mut rng);
        let reference = reference_rows(format, &bytes, COLS);
        let got = to_vec(layer(format, &bytes, device).rows_of(&ids)).expect("readback");
        for (i, &id) in ids.iter().enumerate() {
            for (c, want) in reference[id as usize].iter().enumerate() {
                let got = got[i * COLS + c];
                // A fused multiply-add may round `d·q + m` once where the reference rounds twice.
                assert!(
                    (got - want).abs() <= want.abs() * 1e-6 + 1e-7,
                    "{name} {format} id {id} value {c}: {got} vs {want}"
                );
            }
        }
    }
}

#[test]
fn cpu_matmul_matches_the_reference() {
    let device = DeviceKind::Cpu.device().expect("cpu device");
    // 8-bit activations: each value off by at most half a step (max|x| / 254), times |w|;
    // `f16` activations (for F16 weights) by far less.
    check_matmul(&device, "cpu", |magnitude, wx| {
        wx / 254.0 + magnitude * 1e-5 + 1e-5
    });
}

#[test]
fn cpu_rows_match_the_reference() {
    let device = DeviceKind::Cpu.device().expect("cpu device");
    check_rows(&device, "cpu");
}

#[test]
fn wgpu_matmul_matches_the_reference() {
    let Some(device) = wgpu_device() else { return };
    check_matmul(&device, "wgpu", |magnitude, _| magnitude * 1e-5 + 1e-6);
}

/// Plain rows (F32, F16) whose width is not a multiple of 8 (20: the wgpu products' last
/// `vec4` of activations lies past the row's last group of eight) or of 4 (13: activations
/// read one at a time), on the wgpu device against the reference, for one token and a tile.
#[test]
fn wgpu_plain_rows_of_any_width_match_the_reference() {
    let Some(device) = wgpu_device() else { return };
    let mut rng = Rng(0x0dd);
    for cols in [13usize, 20] {
        for format in [QuantFormat::F32, QuantFormat::F16] {
            let bytes = random_matrix(format, ROWS, cols, &mut rng);
            let layout = QuantLayout {
                format,
                rows: ROWS,
                cols,
            };
            let layer =
                QLinear::from_bytes("test", &bytes, None, layout, &device).expect("shape matches");
            let reference = reference_rows(format, &bytes, cols);
            for tokens in [1, TOKENS] {
                let x: Vec<f32> = (0..tokens * cols).map(|_| rng.float()).collect();
                let input =
                    Tensor::<2>::from_data(TensorData::new(x.clone(), [tokens, cols]), &device);
                let got = to_vec(layer.forward(input)).expect("readback");
                assert_eq!(got.len(), tokens * ROWS);
                for t in 0..tokens {
                    let xt = &x[t * cols..(t + 1) * cols];
                    for (r, w) in reference.iter().enumerate() {
                        let (want, magnitude) = reference_dot(w, xt);
                        let got = f64::from(got[t * ROWS + r]);
                        assert!(
                            (got - want).abs() <= magnitude * 1e-5 + 1e-6,
                            "{format} {cols} wide, {tokens} tokens, token {t} row {r}: {got} vs {want}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn wgpu_rows_match_the_reference() {
    let Some(device) = wgpu_device() else { return };
    check_rows(&device, "wgpu");
}

/// Three layers stacked into one product give each layer's own product (its bias added),
/// on every device: the same bits on the CPU (the same row dots), within float reassociation
/// on wgpu. The layers are of one format, then of three (a layer's Q5_0 queries and keys
/// beside its Q8_0 values), the first and last with a bias.
fn check_stacked(device: &Device, name: &str) {
    let mut rng = Rng(0x57ac);
    let all = QuantFormat::ALL;
    let mixes = all.iter().map(|&f| [f; 3]).chain(
        (0..all.len()).map(|i| [all[i], all[(i + 1) % all.len()], all[(i + 3) % all.len()]]),
    );
    for formats in mixes {
        let rows = [ROWS, 40, 9];
        let layers: Vec<QLinear> = rows
            .iter()
            .zip(formats)
            .enumerate()
            .map(|(i, (&rows, format))| {
                let bytes = random_matrix(format, rows, COLS, &mut rng);
                let layout = QuantLayout {
                    format,
                    rows,
                    cols: COLS,
                };
                let bias = (i != 1).then(|| {
                    let values: Vec<f32> = (0..rows).map(|_| rng.float()).collect();
                    Tensor::<1>::from_data(TensorData::new(values, [rows]), device)
                });
                QLinear::from_bytes("test", &bytes, bias, layout, device).expect("shape matches")
            })
            .collect();
        // One token (decoding: each layer's outputs are a contiguous range of the product's)
        // and several (prefill: strided views).
        for tokens in [1, TOKENS] {
            let x: Vec<f32> = (0..tokens * COLS).map(|_| rng.float()).collect();
            let input =
                || Tensor::<2>::from_data(TensorData::new(x.clone(), [tokens, COLS]), device);
            let stacked = [&layers[0], &layers[1], &layers[2]];
            let bias = QLinear::stacked_bias(&stacked);
            let stacked = QLinear::forward_stacked(stacked, bias.as_ref(), input());
            for (i, (layer, got)) in layers.iter().zip(stacked).enumerate() {
                let want = to_vec(layer.forward(input())).expect("readback");
                let got = to_vec(got).expect("readback");
                assert_eq!(got.len(), want.len(), "{name} {formats:?} layer {i}");
                for (n, (g, w)) in got.iter().zip(&want).enumerate() {
                    assert!(
                        (g - w).abs() <= w.abs() * 1e-6,
                        "{name} {formats:?} {tokens} tokens, layer {i} value {n}: {g} vs {w}"
                    );
                }
            }
        }
    }
}

#[test]
fn cpu_stacked_matmul_matches_each_layer() {
    let device = DeviceKind::Cpu.device().expect("cpu device");
    check_stacked(&device, "cpu");
}

#[test]
fn wgpu_stacked_matmul_matches_each_layer() {
    let Some(device) = wgpu_device() else { return };
    check_stacked(&device, "wgpu");
}

/// A gated MLP's gate and up products and its gate in one launch (the wgpu device's) give the
/// values of the stacked product followed by the fused gate: SiLU and GELU, the two matrices
/// of one format and of two, one token and a prefill's tiles with a remainder.
#[test]
#[cfg(feature = "wgpu")]
fn wgpu_gated_product_equals_the_stacked_product_then_the_gate() {
    let Some(device) = wgpu_device() else { return };
    let mut rng = Rng(0x6a7e);
    let all = QuantFormat::ALL;
    for i in 0..all.len() {
        for formats in [[all[i]; 2], [all[i], all[(i + 1) % all.len()]]] {
            let layers: Vec<QLinear> = formats
                .iter()
                .map(|&format| {
                    let bytes = random_matrix(format, ROWS, COLS, &mut rng);
                    let layout = QuantLayout {
                        format,
                        rows: ROWS,
                        cols: COLS,
                    };
                    QLinear::from_bytes("test", &bytes, None, layout, &device)
                        .expect("shape matches")
                })
                .collect();
            for tokens in [1, TOKENS] {
                // Scaled so that the gate's inputs cross GELU's ±10 and SiLU's saturation.
                let x: Vec<f32> = (0..tokens * COLS).map(|_| rng.float() * 2.0).collect();
                let input =
                    || Tensor::<2>::from_data(TensorData::new(x.clone(), [tokens, COLS]), &device);
                for gelu in [false, true] {
                    let got = QLinear::forward_gated(&layers[0], &layers[1], input(), gelu)
                        .expect("two layers of one shape");
                    let [gate, up] =
                        QLinear::forward_stacked([&layers[0], &layers[1]], None, input());
                    let want =
                        to_vec(stampo_model::fused::gated(gate, up, gelu)).expect("readback");
                    let got = to_vec(got).expect("readback");
                    assert_eq!(got.len(), want.len());
                    for (n, (g, w)) in got.iter().zip(&want).enumerate() {
                        assert!(
                            (g - w).abs() <= w.abs() * 1e-5 + 1e-6,
                            "{formats:?} {tokens} tokens, gelu {gelu}, value {n}: {g} vs {w}"
                        );
                    }
                }
            }
        }
    }
}

/// The products with chosen rows only (the output head's logits of the tokens a grammar
/// allows) are the whole product's columns, on every device: ids across the layer's three
/// parts, out of order and repeated, with a bias.
fn check_chosen_rows(device: &Device, name: &str) {
    let mut rng = Rng(0xc405e);
    let ids = [3u32, 4, 5, 29, 30, 66, 0, 12, 12, 45];
    for format in QuantFormat::ALL {
        let bytes = random_matrix(format, ROWS, COLS, &mut rng);
        let layout = QuantLayout {
            format,
            rows: ROWS,
            cols: COLS,
        };
        let part_bytes = 30 * format.row_bytes(COLS).expect("whole blocks");
        let bias: Vec<f32> = (0..ROWS).map(|_| rng.float()).collect();
        let bias = Tensor::<1>::from_data(TensorData::new(bias, [ROWS]), device);
        let layer = QLinear::from_bytes_in_parts(
            "test",
            &bytes,
            Some(bias.clone()),
            layout,
            device,
            part_bytes,
        )
        .expect("shape matches");
        // A decoding step's single token, a few, and more than a tile of the wgpu matmul.
        for tokens in [1, 3, TOKENS] {
            let x: Vec<f32> = (0..tokens * COLS).map(|_| rng.float()).collect();
            let input =
                || Tensor::<2>::from_data(TensorData::new(x.clone(), [tokens, COLS]), device);
            let all = to_vec(layer.forward(input())).expect("readback");
            let chosen = to_vec(layer.forward_rows(input(), &ids)).expect("readback");
            assert_eq!(chosen.len(), tokens * ids.len(), "{name} {format}");
            for t in 0..tokens {
                for (j, &id) in ids.iter().enumerate() {
                    let (got, want) = (chosen[t * ids.len() + j], all[t * ROWS + id as usize]);
                    assert_eq!(
                        got.to_bits(),
                        want.to_bits(),
                        "{name} {format} {tokens} tokens: token {t}, row {id}: {got} vs {want}"
                    );
                }
            }
            // The whole matrix in one part gives every column the same bits: each part's
            // product fills its own columns (in place, on the wgpu device).
            let whole = QLinear::from_bytes("test", &bytes, Some(bias.clone()), layout, device)
                .expect("shape matches");
            assert_eq!(whole.parts.len(), 1);
            let all_bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(
                all_bits(&to_vec(whole.forward(input())).expect("readback")),
                all_bits(&all),
                "{name} {format} {tokens} tokens: parts against one"
            );
            // The sorted ids of a mask, across the parts, all in one part, and none.
            let sorted = [0u32, 3, 29, 30, 31, 59, 60, 66];
            let across = to_vec(layer.forward_rows(input(), &sorted)).expect("readback");
            for t in 0..tokens {
                for (j, &id) in sorted.iter().enumerate() {
                    assert_eq!(
                        across[t * sorted.len() + j].to_bits(),
                        all[t * ROWS + id as usize].to_bits(),
                        "{name} {format} {tokens} tokens: token {t}, sorted row {id}"
                    );
                }
            }
            let one_part = to_vec(layer.forward_rows(input(), &[30, 31, 59])).expect("readback");
            assert_eq!(
                one_part[..3],
                [all[30], all[31], all[59]],
                "{name} {format}"
            );
            assert!(
                to_vec(layer.forward_rows(input(), &[]))
                    .expect("readback")
                    .is_empty()
            );
        }
    }
}

#[test]
fn cpu_chosen_rows_equal_the_whole_products_columns() {
    let device = DeviceKind::Cpu.device().expect("cpu device");
    check_chosen_rows(&device, "cpu");
}

#[test]
fn wgpu_chosen_rows_equal_the_whole_products_columns() {
    let Some(device) = wgpu_device() else { return };
    check_chosen_rows(&device, "wgpu");
}
