//! The CPU kernels of the quantised matmul against the scalar reference: `stampo-gguf`'s
//! dequantisation (ggml's `dequantize_row_*`) followed by an `f64` dot product.
//!
//! Random blocks of every supported format, with realistic `f16` scales, are decoded by our
//! unpacker (must be bit-identical to the reference), dotted by the SIMD kernel (must equal the
//! portable kernel up to float reassociation), and multiplied through the threaded matmul (must
//! equal the reference within the error that quantising the activations to 8 bits implies).
//!
//! The same tests run as wasm32 in Node (`scripts/test-wasm-kernels.sh`), where the kernels
//! under test are the `simd128` ones.

use half::f16;
use stampo_gguf::{GgmlType, dequantize_to_vec};
use stampo_quant::QuantFormat;
use stampo_quant::act::QuantizedActs;
use stampo_quant::attention::{
    MAX_ROWS, TILE as F16_TILE, exponentials, mix_block, mix_block_portable, round_to_f16,
    round_to_f16_portable, scores_block, scores_block_portable,
};
use stampo_quant::dot::{
    IntRows, TOKENS, dot_f32, dot_f32_portable, dot_int, dot_int_portable, dot_q4_1_portable,
    dot_q4_k_portable, dot_q5_0_portable, dot_q6_k_portable, dot_q8_0_portable, dot_raw, raw_dot,
    raw_dot_tokens,
};
use stampo_quant::matmul::{QuantMatrix, quant_matmul, quant_matmul_rows};
use stampo_quant::octet::{RowOctets, octet_dot};
use stampo_quant::pool::Pool;
use stampo_quant::sample::{Rng, random_matrix};
use stampo_quant::unpack::{UnpackedRow, dequantize_row, unpack_row};
use std::sync::Arc;

fn ggml_type(format: QuantFormat) -> GgmlType {
    GgmlType::from_id(format.ggml_id()).expect("every supported format is a ggml type")
}

/// A random `rows × cols` matrix of `format`, whole.
fn random_quant_matrix(
    format: QuantFormat,
    rows: usize,
    cols: usize,
    rng: &mut Rng,
) -> QuantMatrix {
    QuantMatrix {
        bytes: Arc::new(random_matrix(format, rows, cols, rng)),
        offset: 0,
        format,
        rows,
        cols,
    }
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn decoding_is_bit_identical_to_the_gguf_reference() {
    let mut rng = Rng(0x5eed);
    for format in QuantFormat::ALL {
        let cols = 512;
        let bytes = random_matrix(format, 3, cols, &mut rng);
        let reference =
            dequantize_to_vec(ggml_type(format), &bytes).expect("reference dequantises");
        let row_bytes = format.row_bytes(cols).expect("whole blocks");
        let mut ours = Vec::new();
        for (r, row) in bytes.chunks_exact(row_bytes).enumerate() {
            dequantize_row(format, row, cols, &mut ours);
            let want = &reference[r * cols..(r + 1) * cols];
            for (i, (a, b)) in ours.iter().zip(want).enumerate() {
                assert_eq!(
                    a.to_bits(),
                    b.to_bits(),
                    "{format} row {r} value {i}: {a} vs {b}"
                );
            }
        }
    }
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn simd_dot_equals_the_portable_kernel() {
    let mut rng = Rng(42);
    for format in QuantFormat::ALL {
        // 768 = three K-quant blocks; an odd number of 16-value groups is covered by 32-blocks.
        for cols in [256usize, 768] {
            let bytes = random_matrix(format, 1, cols, &mut rng);
            let x: Vec<f32> = (0..cols).map(|_| 3.0 * rng.float()).collect();
            let acts = QuantizedActs::encode(format, &x, cols);
            let mut row = UnpackedRow::default();
            unpack_row(format, &bytes, cols, &mut row);
            let (fast, slow) = match format {
                QuantFormat::F32 | QuantFormat::F16 => (
                    dot_f32(&row.values, acts.row_values(0)),
                    dot_f32_portable(&row.values, acts.row_values(0)),
                ),
                _ => {
                    let rows = IntRows {
                        wq: &row.q,
                        wscale: &row.scale,
                        woffset: &row.offset,
                        xq: acts.row_q(0),
                        xd: acts.row_d(0),
                        xsum: acts.row_sum(0),
                    };
                    (dot_int(&rows), dot_int_portable(&rows))
                }
            };
            let tol = 1e-5 * slow.abs().max(1.0);
            assert!(
                (fast - slow).abs() <= tol,
                "{format} cols {cols}: simd {fast} portable {slow}"
            );
        }
    }
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn fused_kernels_equal_the_portable_kernel() {
    let mut rng = Rng(7);
    let mut fused = 0;
    for format in QuantFormat::ALL {
        // 224: seven blocks of 32, which the `simd128` kernels' four-block steps do not divide.
        for cols in [224usize, 256, 768] {
            if format.row_bytes(cols).is_none() {
                continue;
            }
            let bytes = random_matrix(format, 1, cols, &mut rng);
            let x: Vec<f32> = (0..cols).map(|_| 3.0 * rng.float()).collect();
            let acts = QuantizedActs::encode(format, &x, cols);
            let Some(fast) = dot_raw(format, &bytes, &acts, 0) else {
                continue;
            };
            fused += 1;
            let mut row = UnpackedRow::default();
            unpack_row(format, &bytes, cols, &mut row);
            let slow = dot_int_portable(&IntRows {
                wq: &row.q,
                wscale: &row.scale,
                woffset: &row.offset,
                xq: acts.row_q(0),
                xd: acts.row_d(0),
                xsum: acts.row_sum(0),
            });
            let tol = 1e-5 * slow.abs().max(1.0);
            assert!(
                (fast - slow).abs() <= tol,
                "{format} cols {cols}: fused {fast} portable {slow}"
            );
            let (q, d) = (acts.row_q(0), acts.row_d(0));
            let portable = match format {
                QuantFormat::Q8_0 => dot_q8_0_portable(&bytes, q, d),
                QuantFormat::Q4_1 => dot_q4_1_portable(&bytes, q, d, acts.row_sum(0)),
                QuantFormat::Q5_0 => dot_q5_0_portable(&bytes, q, d),
                QuantFormat::Q4K => dot_q4_k_portable(&bytes, q, d),
                QuantFormat::Q6K => dot_q6_k_portable(&bytes, q, d),
                _ => panic!("{format} has a fused kernel but no portable one in this test"),
            };
            assert!(
                (portable - slow).abs() <= tol,
                "{format} cols {cols}: fused portable {portable} unpacked {slow}"
            );
        }
    }
    assert_eq!(
        fused, 13,
        "Q8_0, Q4_1 and Q5_0 at three widths, Q4_K and Q6_K at two, have fused kernels"
    );
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn threaded_matmul_matches_the_dequantised_reference() {
    let mut rng = Rng(7);
    // Six tokens: a multi-row kernel's four and two one at a time.
    let (rows, cols, tokens) = (37, 512, 6);
    for format in QuantFormat::ALL {
        let bytes = random_matrix(format, rows, cols, &mut rng);
        let w = dequantize_to_vec(ggml_type(format), &bytes).expect("reference dequantises");
        let x: Vec<f32> = (0..tokens * cols).map(|_| 2.0 * rng.float()).collect();
        let matrix = QuantMatrix {
            bytes: Arc::new(bytes),
            offset: 0,
            format,
            rows,
            cols,
        };
        let one = quant_matmul(&matrix, &x, tokens, &Pool::new(1));
        let three = quant_matmul(&matrix, &x, tokens, &Pool::new(3));
        assert_eq!(one, three, "{format}: the thread count changed the result");
        for t in 0..tokens {
            let xs = &x[t * cols..(t + 1) * cols];
            let xmax = xs.iter().fold(0.0f32, |m, v| m.max(v.abs())) as f64;
            for n in 0..rows {
                let ws = &w[n * cols..(n + 1) * cols];
                let exact: f64 = ws
                    .iter()
                    .zip(xs)
                    .map(|(&a, &b)| f64::from(a) * f64::from(b))
                    .sum();
                let wabs: f64 = ws.iter().map(|&a| f64::from(a).abs()).sum();
                // 8-bit activations are off by at most half a step, `max|x| / 254`, per value;
                // half-rounded ones by 2^-11 relative; f32 only by reassociation.
                let bound = match format.activation() {
                    stampo_quant::ActivationFormat::F32 => 1e-5 * wabs * xmax,
                    stampo_quant::ActivationFormat::F16 => 1e-3 * wabs * xmax,
                    _ => wabs * xmax / 254.0 + 1e-4,
                };
                let got = f64::from(one[t * rows + n]);
                assert!(
                    (got - exact).abs() <= bound,
                    "{format} token {t} row {n}: {got} vs {exact} (bound {bound})"
                );
            }
        }
    }
}

/// A prefill's product (hundreds of activation rows: weights repacked, rows in chunks and
/// passes) gives each row what a decoding step's product of that row alone gives, bit for
/// bit, so a prompt's cache holds the numbers decoding it token by token would.
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_long_product_equals_each_rows_own_bit_for_bit() {
    let mut rng = Rng(13);
    // 300 rows of 1,024 values: three chunks of the octet products, the last partial.
    let (rows, cols, tokens) = (21, 1024, 300);
    for format in QuantFormat::ALL {
        let matrix = random_quant_matrix(format, rows, cols, &mut rng);
        let x: Vec<f32> = (0..tokens * cols)
            .map(|i| (1.0 + (i / cols % 7) as f32) * (2.0 * rng.float() - 1.0))
            .collect();
        let pool = Pool::new(2);
        let all = quant_matmul(&matrix, &x, tokens, &pool);
        for t in 0..tokens {
            let one = quant_matmul(&matrix, &x[t * cols..(t + 1) * cols], 1, &pool);
            let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(
                bits(&all[t * rows..(t + 1) * rows]),
                bits(&one),
                "{format}: row {t}"
            );
        }
    }
}

/// The products with a few rows only (the output head's rows of the tokens a grammar
/// allows) are the full product's values in those rows, bit for bit: runs of consecutive
/// rows, lone rows, a run longer than a piece, a repeated row, rows past the matrix (0).
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn products_with_chosen_rows_equal_the_full_products_columns_bit_for_bit() {
    let mut rng = Rng(17);
    let (rows, cols) = (200, 512);
    let mut ids: Vec<u32> = vec![0, 1, 2, 5, 9, 10, 11, 12, 13, 14, 15, 16, 17, 30];
    ids.extend(60..190); // 130 rows: more than one piece of 32K weights
    ids.extend([190, 190, 199, 200, 7_000]);
    for format in QuantFormat::ALL {
        let matrix = random_quant_matrix(format, rows, cols, &mut rng);
        // One token (a decoding step), a few (row kernels), and a prefill's worth (octets).
        for tokens in [1, 3, 9] {
            let x: Vec<f32> = (0..tokens * cols)
                .map(|i| (1.0 + (i / cols % 5) as f32) * (2.0 * rng.float() - 1.0))
                .collect();
            let pool = Pool::new(3);
            let all = quant_matmul(&matrix, &x, tokens, &pool);
            let chosen = quant_matmul_rows(&matrix, &x, tokens, &ids, &pool);
            assert_eq!(chosen.len(), tokens * ids.len());
            for t in 0..tokens {
                for (j, &id) in ids.iter().enumerate() {
                    let want = all
                        .get(t * rows + id as usize)
                        .filter(|_| (id as usize) < rows);
                    assert_eq!(
                        chosen[t * ids.len() + j].to_bits(),
                        want.map_or(0, |v| v.to_bits()),
                        "{format}, {tokens} tokens: token {t}, row {id}"
                    );
                }
            }
        }
    }
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn multi_row_kernels_equal_the_single_row_ones_bit_for_bit() {
    let mut rng = Rng(11);
    let mut tested = 0;
    for format in QuantFormat::ALL {
        let Some(many) = raw_dot_tokens(format) else {
            continue;
        };
        let one = raw_dot(format).expect("a multi-row kernel has a single-row one");
        tested += 1;
        for cols in [256usize, 768] {
            let weight_rows = 5;
            let bytes = random_matrix(format, weight_rows, cols, &mut rng);
            let row_bytes = bytes.len() / weight_rows;
            let rows = 7;
            let x: Vec<f32> = (0..rows * cols).map(|_| 3.0 * rng.float()).collect();
            let acts = QuantizedActs::encode(format, &x, cols);
            for t0 in [0, rows - TOKENS] {
                // One slot more than there are weight rows: it is left as it was.
                let mut got = vec![[f32::NAN; TOKENS]; weight_rows + 1];
                many(&bytes, row_bytes, &acts, t0, &mut got);
                for (i, sums) in got[..weight_rows].iter().enumerate() {
                    let row = &bytes[i * row_bytes..(i + 1) * row_bytes];
                    for (k, v) in sums.iter().enumerate() {
                        let want = one(row, &acts, t0 + k);
                        assert_eq!(
                            v.to_bits(),
                            want.to_bits(),
                            "{format} cols {cols} weight row {i} row {}: {v} vs {want}",
                            t0 + k
                        );
                    }
                }
                assert!(got[weight_rows].iter().all(|v| v.is_nan()));
            }
        }
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        assert_eq!(
            tested, 5,
            "Q8_0, Q4_1, Q5_0, Q4_K and Q6_K have multi-row kernels with AVX2"
        );
    }
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    assert_eq!(
        tested, 4,
        "Q4_1, Q5_0, Q4_K and Q6_K have multi-row kernels with simd128"
    );
}

/// The kernels over weight rows repacked eight at a time give each row's single-row result
/// bit for bit: counts of rows that leave the last octet partly padding, and activation rows
/// with one large value (the others round to ±127 and 0).
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn octet_kernels_equal_the_single_row_ones_bit_for_bit() {
    let mut rng = Rng(5);
    let mut packed = RowOctets::new();
    let mut tested = Vec::new();
    for format in QuantFormat::ALL {
        let Some(octet) = octet_dot(format) else {
            continue;
        };
        tested.push(format);
        let one = raw_dot(format).expect("an octet kernel has a single-row one");
        // Q5_0 and Q4_1 widths of the models (and two blocks), then K-quant ones.
        let shapes = [
            (13usize, 64usize),
            (8, 896),
            (21, 640),
            (13, 256),
            (8, 768),
            (21, 512),
        ];
        for (weight_rows, cols) in shapes {
            if format.row_bytes(cols).is_none() {
                continue;
            }
            let bytes = random_matrix(format, weight_rows, cols, &mut rng);
            let row_bytes = bytes.len() / weight_rows;
            // Enough activation rows for a kernel's passes of several and the rest alone,
            // each row on a scale of its own.
            let rows = 11;
            let x: Vec<f32> = (0..rows * cols)
                .map(|i| {
                    let row_scale = 1.0 + 0.37 * (i / cols) as f32;
                    row_scale
                        * if i % 29 == 0 {
                            500.0
                        } else {
                            3.0 * rng.float() - 1.5
                        }
                })
                .collect();
            let acts = QuantizedActs::encode(format, &x, cols);
            packed.pack(format, &bytes, row_bytes);
            assert_eq!(packed.octets(), weight_rows.div_ceil(8));
            for o in 0..packed.octets() {
                // All the rows in one call, and the rows from the third in another.
                let mut all = vec![[f32::NAN; 8]; rows];
                octet(&packed, o, &acts, 0, &mut all);
                let mut later = vec![[f32::NAN; 8]; rows - 2];
                octet(&packed, o, &acts, 2, &mut later);
                for t in 0..rows {
                    let mut got = all[t].to_vec();
                    if t >= 2 {
                        got.extend_from_slice(&later[t - 2]);
                    }
                    for (r, v) in got.iter().enumerate() {
                        let r = r % 8;
                        let i = 8 * o + r;
                        let want = match bytes.get(i * row_bytes..(i + 1) * row_bytes) {
                            Some(row) => one(row, &acts, t),
                            None => 0.0,
                        };
                        assert_eq!(
                            v.to_bits(),
                            want.to_bits(),
                            "{format} {weight_rows} × {cols}: weight row {i} activation row {t}: {v} vs {want}"
                        );
                    }
                }
            }
        }
    }
    println!("octet kernels tested: {tested:?}");
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        assert_eq!(
            tested,
            [
                QuantFormat::Q4_1,
                QuantFormat::Q5_0,
                QuantFormat::Q4K,
                QuantFormat::Q6K
            ],
            "Q4_1, Q5_0, Q4_K and Q6_K have octet kernels with AVX2"
        );
    }
}

/// The Q4_K and Q6_K kernels (AVX2 and `simd128`), and in wasm the `simd128` Q5_0 one, give
/// the portable loops' results bit for bit (the same exact integer per block, scaled the same
/// way), so the native and browser builds compute the same numbers for these formats. (The
/// AVX2 Q8_0, Q4_1 and Q5_0 kernels sum in lanes, as ggml's do: the tolerance of
/// `fused_kernels_equal_the_portable_kernel` applies to them.)
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn block_integer_kernels_equal_the_portable_loops_bit_for_bit() {
    let formats: &[QuantFormat] = if cfg!(target_arch = "wasm32") {
        &[QuantFormat::Q5_0, QuantFormat::Q4K, QuantFormat::Q6K]
    } else {
        &[QuantFormat::Q4K, QuantFormat::Q6K]
    };
    let mut rng = Rng(13);
    for &format in formats {
        // 96 and 224 (Q5_0's 3 and 7 blocks): rows the four-block steps do not divide.
        for cols in [96usize, 224, 256, 768] {
            if format.row_bytes(cols).is_none() {
                continue;
            }
            let bytes = random_matrix(format, 1, cols, &mut rng);
            let x: Vec<f32> = (0..cols)
                .map(|i| {
                    if i % 31 == 0 {
                        90.0
                    } else {
                        3.0 * rng.float() - 1.5
                    }
                })
                .collect();
            let acts = QuantizedActs::encode(format, &x, cols);
            let fast = dot_raw(format, &bytes, &acts, 0).expect("a fused kernel");
            let (q, d) = (acts.row_q(0), acts.row_d(0));
            let slow = match format {
                QuantFormat::Q5_0 => dot_q5_0_portable(&bytes, q, d),
                QuantFormat::Q4K => dot_q4_k_portable(&bytes, q, d),
                _ => dot_q6_k_portable(&bytes, q, d),
            };
            assert_eq!(
                fast.to_bits(),
                slow.to_bits(),
                "{format} cols {cols}: {fast} vs {slow}"
            );
        }
    }
}

/// Every `f16` bit pattern read as a key by [`scores_block`] (one dimension, the query 1) is
/// its value (added to the chain's zero, so −0 comes out +0): the `simd128` widening of
/// halves, checked on all 65,536 of them (natively the portable loop, which converts with
/// `half`).
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn every_half_is_read_as_its_value() {
    // In order, then shifted by 8 so that tiles of 16 mix infinities and NaNs with finite
    // halves.
    for shift in [0, 8] {
        let mut keys: Vec<f16> = (0..=u16::MAX).map(f16::from_bits).collect();
        keys.rotate_left(shift);
        let n = keys.len();
        let mut out = vec![0.0f32; n];
        scores_block(&[1.0], 1, &keys, 1, n, 0..n / F16_TILE, &mut out);
        for (h, got) in keys.iter().zip(&out) {
            let want = 0.0 + h.to_f32();
            if want.is_nan() {
                assert!(got.is_nan(), "{:#06x}: {got}", h.to_bits());
            } else {
                assert_eq!(got.to_bits(), want.to_bits(), "{:#06x}", h.to_bits());
            }
        }
    }
}

/// Random `f16` values in −2…2 (those of a cache), `count` of them.
fn random_halves(count: usize, rng: &mut Rng) -> Vec<f16> {
    (0..count)
        .map(|_| f16::from_f32(rng.float() * 2.0))
        .collect()
}

/// The attention loops over an `f16` cache give the portable loops' results bit for bit:
/// one to four query rows, keys ending inside a tile, chains written and then added.
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn f16_cache_loops_equal_the_portable_ones() {
    let mut rng = Rng(0xf16);
    for dim in [16, 64, 128] {
        for n in [1usize, 16, 37, 100] {
            let tiles = n.div_ceil(F16_TILE);
            let keys = random_halves(tiles * F16_TILE * dim, &mut rng);
            let values = random_halves(n * dim, &mut rng);
            for rows in 1..=MAX_ROWS {
                let q: Vec<f32> = (0..rows * dim).map(|_| rng.float()).collect();
                let (mut got, mut want) = (vec![0.0f32; rows * n], vec![0.0f32; rows * n]);
                scores_block(&q, rows, &keys, dim, n, 0..tiles, &mut got);
                scores_block_portable(&q, rows, &keys, dim, n, 0..tiles, &mut want);
                assert_eq!(
                    bits(&got),
                    bits(&want),
                    "scores: dim {dim}, {n} keys, {rows} rows"
                );

                let p: Vec<f32> = (0..rows * n).map(|_| rng.float().abs()).collect();
                let (mut got, mut want) = (vec![0.0f32; rows * dim], vec![0.0f32; rows * dim]);
                let cut = n / 3;
                for (keys, add) in [(0..cut, false), (cut..n, true)] {
                    mix_block(&p, rows, &values, dim, n, keys.clone(), add, &mut got);
                    mix_block_portable(&p, rows, &values, dim, n, keys, add, &mut want);
                }
                assert_eq!(
                    bits(&got),
                    bits(&want),
                    "mix: dim {dim}, {n} keys, {rows} rows"
                );
            }
        }
    }
}

fn bits(values: &[f32]) -> Vec<u32> {
    values.iter().map(|v| v.to_bits()).collect()
}

/// Rounding to `f16` gives `half`'s conversion there and back, bit for bit, on a sweep of
/// every kind of `f32`: both signs, zeros, subnormal and normal halves, ties, values that
/// round up to the next exponent or past the largest half, infinities and NaNs (any NaN for
/// a NaN).
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn rounding_to_f16_equals_half_s() {
    let mut values: Vec<f32> = (0..=u32::MAX).step_by(4099).map(f32::from_bits).collect();
    // Ties and their neighbours around the normal and subnormal halves, and the overflow edge.
    for base in [1.0f32, 1.5, 6.1e-5, 3.0e-6, 65_504.0, 65_519.0, 65_520.0] {
        let bits = base.to_bits();
        for delta in [0u32, 1, 0xFFF, 0x1000, 0x1001, 0x2000] {
            values.extend([f32::from_bits(bits + delta), -f32::from_bits(bits - delta)]);
        }
    }
    let mut got = values.clone();
    round_to_f16(&mut got);
    let mut want = values.clone();
    round_to_f16_portable(&mut want);
    for ((x, g), w) in values.iter().zip(&got).zip(&want) {
        if w.is_nan() {
            assert!(g.is_nan(), "{x:e}: {g}");
        } else {
            assert_eq!(g.to_bits(), w.to_bits(), "{x:e} ({:#010x})", x.to_bits());
        }
    }
}

/// The softmax's exponentials are `f32::exp`'s bit for bit, on a sweep of the non-positive
/// `f32`s from −0 past the point where `expf` underflows, on rows whose maximum is not zero,
/// and with a NaN among them (in wasm, the `simd128` port of `libm`'s `expf` against `libm`'s
/// own).
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn exponentials_equal_f32_exp() {
    let mut values: Vec<f32> = (0x8000_0000u32..=0xC2F0_0000)
        .step_by(1021)
        .map(f32::from_bits)
        .collect();
    values.extend([
        0.0,
        -0.0,
        -1e-45,
        -6.1e-5,
        -0.346,
        -0.347,
        -1.04,
        -87.336_55,
        -103.972_08,
        -103.972_09,
        -1e30,
        f32::NEG_INFINITY,
    ]);
    for max in [0.0f32, 3.5, -2.25] {
        let row: Vec<f32> = values.iter().map(|&x| x + max).collect();
        let mut got = row.clone();
        exponentials(&mut got, max);
        for (x, g) in row.iter().zip(&got) {
            let want = (x - max).exp();
            assert_eq!(g.to_bits(), want.to_bits(), "exp({x:e} − {max})");
        }
    }
    let mut row = vec![-1.0f32, f32::NAN, -3.0, -0.5, -2.0];
    exponentials(&mut row, 0.0);
    assert!(row[1].is_nan());
    assert_eq!(row[0].to_bits(), (-1.0f32).exp().to_bits());
    assert_eq!(row[4].to_bits(), (-2.0f32).exp().to_bits());
}

/// Activations encoded for Q8_0 weights are ggml's `quantize_row_q8_0` as its x86 kernels
/// compute it (scale `amax / 127` kept as `f16`, quants `round(x · 127 / amax)` ties to even,
/// each group of 16's quant sum and its scaled sum), whichever loop encodes them (AVX2 where
/// the CPU has it, the portable one elsewhere and in wasm): values of every size, ties, a
/// block of zeros.
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn q8_0_activations_are_ggml_s() {
    let mut rng = Rng(0xac7);
    let cols = 256;
    for scale in [0.0f32, 1e-30, 0.01, 1.0, 3.0, 1e6] {
        let mut x: Vec<f32> = (0..3 * cols).map(|_| scale * rng.float()).collect();
        // Ties at 127 / amax: a value at the maximum and halves of it.
        for b in (0..x.len()).step_by(32) {
            x[b + 5] = 2.5 * scale;
            x[b + 9] = -1.5 * scale;
        }
        x[32..64].fill(0.0);
        let acts = QuantizedActs::encode(QuantFormat::Q8_0, &x, cols);
        for (b, xs) in x.chunks_exact(32).enumerate() {
            let amax = xs.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
            let q: Vec<i8> = xs
                .iter()
                .map(|&v| (v * id).round_ties_even() as i8)
                .collect();
            let d = f16::from_f32(amax / 127.0).to_f32();
            assert_eq!(
                &acts.q[32 * b..32 * (b + 1)],
                &q[..],
                "scale {scale} block {b}"
            );
            for g in 0..2 {
                let isum: i32 = q[16 * g..16 * (g + 1)].iter().map(|&v| i32::from(v)).sum();
                let at = 2 * b + g;
                assert_eq!(
                    acts.d[at].to_bits(),
                    d.to_bits(),
                    "scale {scale} group {at}"
                );
                assert_eq!(acts.isum[at], isum, "scale {scale} group {at}");
                assert_eq!(acts.sum[at].to_bits(), (d * isum as f32).to_bits());
            }
        }
    }
}
