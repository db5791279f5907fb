//! The fused layer operations (`stampo_model::fused`) on every device against scalar
//! references in `f64`, on random inputs: RMSNorm (alone, after a residual add, after an
//! output norm and an add, and two tensors' at once), both rotary styles, the KV-cache write
//! (in place, and into a copy when the cache is shared), SiLU and GELU; and, on the wgpu
//! device, attention with and without a window, and the rotation and cache write in one
//! launch.
//!
//! The operands llama.cpp keeps in `f16` are rounded by the `half` crate in the references, so
//! the wgpu kernels' own rounding (from the bits, without `shader-f16`) is checked too. Without
//! an adapter the wgpu cases say so and pass, unless `STAMPO_REQUIRE_WGPU=1`.

mod common;

use burn::tensor::{Tensor, TensorData};
use half::f16;
#[cfg(feature = "wgpu")]
use stampo_model::layers::position_tensor;
use stampo_model::{Device, DeviceKind, fused};

/// The CPU device, and the wgpu device where this build and machine have one.
fn devices() -> Vec<(&'static str, Device)> {
    let mut devices = vec![("cpu", DeviceKind::Cpu.device().expect("cpu device"))];
    if let Some(device) = common::wgpu_device() {
        devices.push(("wgpu", device));
    }
    devices
}
use stampo_quant::sample::Rng;

fn random(rng: &mut Rng, n: usize, scale: f32) -> Vec<f32> {
    (0..n).map(|_| rng.float() * scale).collect()
}

fn tensor<const D: usize>(values: &[f32], shape: [usize; D], device: &Device) -> Tensor<D> {
    Tensor::from_data(TensorData::new(values.to_vec(), shape), device)
}

fn read<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data().try_to_vec::<f32>().expect("readback")
}

fn round16(x: f64) -> f64 {
    f64::from(f16::from_f64(x).to_f32())
}

fn assert_close(what: &str, got: &[f32], want: &[f64], relative: f64, absolute: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let g = f64::from(g);
        assert!(
            (g - w).abs() <= w.abs() * relative + absolute,
            "{what}[{i}]: {g} vs {w}"
        );
    }
}

#[test]
fn rms_norm_matches_the_reference() {
    for (name, device) in devices() {
        rms_norm_matches_the_reference_on(name, &device);
    }
}

fn rms_norm_matches_the_reference_on(name: &str, device: &Device) {
    let mut rng = Rng(1);
    // 130 values a row: more than two per unit, the last pass partial.
    let (rows, dim) = (5, 130);
    let x = random(&mut rng, rows * dim, 3.0);
    let w = random(&mut rng, dim, 2.0);
    let got = read(fused::rms_norm(
        tensor(&x, [rows, dim], device),
        tensor(&w, [dim], device),
        1e-5,
    ));
    let mut want = Vec::new();
    for row in x.chunks(dim) {
        let ms = row
            .iter()
            .map(|&v| f64::from(v) * f64::from(v))
            .sum::<f64>()
            / dim as f64;
        let inv = 1.0 / (ms + 1e-5).sqrt();
        want.extend(
            row.iter()
                .zip(&w)
                .map(|(&v, &w)| f64::from(v) * inv * f64::from(w)),
        );
    }
    assert_close(&format!("{name} rms_norm"), &got, &want, 1e-5, 1e-6);
}

#[test]
fn rope_matches_the_reference_in_both_styles() {
    for (name, device) in devices() {
        rope_matches_the_reference_in_both_styles_on(name, &device);
    }
}

/// The rotation table the kernels read (`[positions, half, 2]`: cosine, sine) for `angles`.
fn rotations(angles: &[f32], positions: usize, half: usize, device: &Device) -> Tensor<3> {
    let table: Vec<f32> = angles.iter().flat_map(|a| [a.cos(), a.sin()]).collect();
    tensor(&table, [positions, half, 2], device)
}

/// `x` (`[tokens, heads, dim]`) rotated for positions `start..` by the tables.
fn rotate_reference(
    x: &[f32],
    heads: usize,
    dim: usize,
    (cos, sin): (&[f32], &[f32]),
    start: usize,
    neox: bool,
) -> Vec<f64> {
    let half = dim / 2;
    let mut want = vec![0.0f64; x.len()];
    for (n, head) in x.chunks(dim).enumerate() {
        let t = n / heads;
        for i in 0..half {
            let (ia, ib) = if neox {
                (i, i + half)
            } else {
                (2 * i, 2 * i + 1)
            };
            let c = f64::from(cos[(start + t) * half + i]);
            let s = f64::from(sin[(start + t) * half + i]);
            let (a, b) = (f64::from(head[ia]), f64::from(head[ib]));
            want[n * dim + ia] = a * c - b * s;
            want[n * dim + ib] = a * s + b * c;
        }
    }
    want
}

fn rope_matches_the_reference_in_both_styles_on(name: &str, device: &Device) {
    let mut rng = Rng(2);
    // Queries and keys with their own head counts, as in grouped-query attention.
    let (tokens, q_heads, k_heads, dim, positions, start) = (3, 4, 2, 16, 10, 5);
    let half = dim / 2;
    let q = random(&mut rng, tokens * q_heads * dim, 2.0);
    let k = random(&mut rng, tokens * k_heads * dim, 2.0);
    let angles: Vec<f32> = (0..positions * half).map(|i| i as f32 * 0.37).collect();
    let cos: Vec<f32> = angles.iter().map(|a| a.cos()).collect();
    let sin: Vec<f32> = angles.iter().map(|a| a.sin()).collect();
    for neox in [false, true] {
        let (got_q, got_k) = fused::rope(
            tensor(&q, [tokens, q_heads, dim], device),
            tensor(&k, [tokens, k_heads, dim], device),
            rotations(&angles, positions, half, device),
            start,
            neox,
        );
        let style = if neox { "neox" } else { "normal" };
        let tables = (cos.as_slice(), sin.as_slice());
        let want_q = rotate_reference(&q, q_heads, dim, tables, start, neox);
        let want_k = rotate_reference(&k, k_heads, dim, tables, start, neox);
        assert_close(
            &format!("{name} {style} q"),
            &read(got_q),
            &want_q,
            1e-6,
            1e-6,
        );
        assert_close(
            &format!("{name} {style} k"),
            &read(got_k),
            &want_k,
            1e-6,
            1e-6,
        );
    }
}

#[test]
fn cache_write_rounds_to_f16_and_leaves_a_shared_cache_alone() {
    for (name, device) in devices() {
        cache_write_rounds_to_f16_and_leaves_a_shared_cache_alone_on(name, &device);
    }
}

fn cache_write_rounds_to_f16_and_leaves_a_shared_cache_alone_on(name: &str, device: &Device) {
    let mut rng = Rng(3);
    let (kv, capacity, dim, tokens, start) = (2, 8, 16, 3, 4);
    let old = random(&mut rng, kv * capacity * dim, 1.0);
    // Includes values below f16's normal range and at a rounding tie's neighbourhood.
    let mut new = random(&mut rng, tokens * kv * dim, 40.0);
    new[0] = 3.0e-6;
    new[1] = -7.5e-7;
    new[2] = 1.000_488_3;
    let new_v: Vec<f32> = new.iter().map(|v| -v * 0.5).collect();
    // The keys are shared with `kept` (written into a copy); the values are not (in place).
    let keys = tensor(&old, [kv, capacity, dim], device);
    let kept = keys.clone();
    let values = tensor(&old, [kv, capacity, dim], device);
    let (keys, values) = fused::cache_write(
        keys,
        values,
        tensor(&new, [tokens, kv, dim], device),
        tensor(&new_v, [tokens, kv, dim], device),
        start,
    );
    for (what, got, new) in [("keys", read(keys), &new), ("values", read(values), &new_v)] {
        let mut want: Vec<f64> = old.iter().map(|&v| f64::from(v)).collect();
        for t in 0..tokens {
            for h in 0..kv {
                for d in 0..dim {
                    let value = f64::from(new[(t * kv + h) * dim + d]);
                    want[(h * capacity + start + t) * dim + d] = round16(value);
                }
            }
        }
        assert_close(&format!("{name} written {what}"), &got, &want, 0.0, 0.0);
    }
    assert_eq!(
        read(kept),
        old,
        "{name}: the write reached a tensor that shared the cache"
    );
}

/// The rotation and the cache write in one launch (the wgpu device's) give the values of the
/// two operations run one after the other, in both rotary styles, and leave a tensor that
/// shared the cache alone.
#[test]
#[cfg(feature = "wgpu")]
fn qk_norms_rope_and_cache_write_in_one_launch_equal_the_three_operations() {
    let Some(device) = common::wgpu_device() else {
        return;
    };
    let device = &device;
    let mut rng = Rng(5);
    // 80 rotated pairs and 160 normed values a head: more than one of each per unit.
    let (tokens, q_heads, kv, dim, capacity, start) = (3, 6, 2, 160, 12, 7);
    let (half, eps) = (dim / 2, 1e-6);
    let width = (q_heads + 2 * kv) * dim;
    let qkv = random(&mut rng, tokens * width, 2.0);
    let old = random(&mut rng, kv * capacity * dim, 1.0);
    let (q_weight, k_weight) = (random(&mut rng, dim, 2.0), random(&mut rng, dim, 2.0));
    let angles: Vec<f32> = (0..capacity * half).map(|i| i as f32 * 0.41).collect();
    let table = || rotations(&angles, capacity, half, device);
    // Each token's query, key and value heads, taken apart as the three operations want them.
    let part = |from: usize, heads: usize| -> Tensor<3> {
        let values: Vec<f32> = qkv
            .chunks(width)
            .flat_map(|row| row[from * dim..(from + heads) * dim].to_vec())
            .collect();
        tensor(&values, [tokens, heads, dim], device)
    };
    let (q, k, v) = (part(0, q_heads), part(q_heads, kv), part(q_heads + kv, kv));
    let cache = || tensor(&old, [kv, capacity, dim], device);
    let position = position_tensor(start, device);
    for (normed, neox) in [(false, false), (false, true), (true, false), (true, true)] {
        let weights = || {
            (
                tensor(&q_weight, [dim], device),
                tensor(&k_weight, [dim], device),
            )
        };
        let (q, k) = match normed {
            true => {
                let (qw, kw) = weights();
                fused::rms_norm_pair(q.clone(), k.clone(), qw, kw, eps)
            }
            false => (q.clone(), k.clone()),
        };
        let (want_q, rotated_k) = fused::rope(q, k, table(), start, neox);
        let (want_keys, want_values) =
            fused::cache_write(cache(), cache(), rotated_k, v.clone(), start);
        let input = tensor(&qkv, [tokens, width], device);
        let kept = (input.clone(), cache());
        let norms = normed.then(|| {
            let (qw, kw) = weights();
            (qw, kw, eps)
        });
        let (got_qkv, got_keys, got_values) = fused::qkv_cache_write(
            input,
            kept.1.clone(),
            cache(),
            table(),
            norms,
            &position,
            neox,
        );
        let got_q = got_qkv.narrow(1, 0, q_heads * dim);
        // The same arithmetic; a GPU's compiler may fuse a multiply-add differently in the two
        // kernels, which can move a cached value by one `f16` step (2⁻¹⁰ relative).
        let what = format!("normed {normed}, neox {neox}");
        for (part, got, want, relative) in [
            ("queries", read(got_q), read(want_q), 1e-6),
            ("keys", read(got_keys), read(want_keys), 1e-3),
            ("values", read(got_values), read(want_values), 0.0),
        ] {
            let want: Vec<f64> = want.iter().map(|&v| f64::from(v)).collect();
            assert_close(&format!("{what}: {part}"), &got, &want, relative, 1e-6);
        }
        assert_eq!(
            read(kept.0),
            qkv,
            "{what}: the rotation reached a shared input"
        );
        assert_eq!(
            read(kept.1),
            old,
            "{what}: the write reached a shared cache"
        );
    }
}

#[test]
fn add_rms_norm_matches_the_reference() {
    for (name, device) in devices() {
        let mut rng = Rng(6);
        let (rows, dim) = (4, 130);
        let x = random(&mut rng, rows * dim, 3.0);
        let h = random(&mut rng, rows * dim, 3.0);
        let w = random(&mut rng, dim, 2.0);
        let (sum, normed) = fused::add_rms_norm(
            tensor(&x, [rows, dim], &device),
            tensor(&h, [rows, dim], &device),
            tensor(&w, [dim], &device),
            1e-6,
        );
        let want_sum: Vec<f32> = x.iter().zip(&h).map(|(a, b)| a + b).collect();
        assert_eq!(read(sum), want_sum, "{name}: x + h");
        let mut want = Vec::new();
        for row in want_sum.chunks(dim) {
            let ms = row
                .iter()
                .map(|&v| f64::from(v) * f64::from(v))
                .sum::<f64>()
                / dim as f64;
            let inv = 1.0 / (ms + 1e-6).sqrt();
            want.extend(
                row.iter()
                    .zip(&w)
                    .map(|(&v, &w)| f64::from(v) * inv * f64::from(w)),
            );
        }
        assert_close(
            &format!("{name} add_rms_norm"),
            &read(normed),
            &want,
            1e-5,
            1e-6,
        );
    }
}

/// `x`'s rows (`dim` each) RMS-normed in `f64`, times `w`.
fn rms_norm_reference(x: &[f64], w: &[f32], eps: f64) -> Vec<f64> {
    let dim = w.len();
    let mut want = Vec::with_capacity(x.len());
    for row in x.chunks(dim) {
        let inv = 1.0 / (row.iter().map(|v| v * v).sum::<f64>() / dim as f64 + eps).sqrt();
        want.extend(row.iter().zip(w).map(|(v, &w)| v * inv * f64::from(w)));
    }
    want
}

/// The query and key norms in one pass (gemma3's, per head: more rows of keys than the
/// queries have here, and fewer in the other order) against the reference.
#[test]
fn rms_norm_pair_matches_the_reference() {
    for (name, device) in devices() {
        let mut rng = Rng(7);
        let dim = 130;
        for (q_rows, k_rows) in [(4, 2), (2, 5)] {
            let q = random(&mut rng, q_rows * dim, 3.0);
            let k = random(&mut rng, k_rows * dim, 3.0);
            let (wq, wk) = (random(&mut rng, dim, 2.0), random(&mut rng, dim, 2.0));
            let (got_q, got_k) = fused::rms_norm_pair(
                tensor(&q, [q_rows, 1, dim], &device),
                tensor(&k, [k_rows, 1, dim], &device),
                tensor(&wq, [dim], &device),
                tensor(&wk, [dim], &device),
                1e-6,
            );
            for (what, got, x, w) in [("q", got_q, &q, &wq), ("k", got_k, &k, &wk)] {
                let x: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
                let want = rms_norm_reference(&x, w, 1e-6);
                assert_close(
                    &format!("{name} pair {what}"),
                    &read(got),
                    &want,
                    1e-5,
                    1e-6,
                );
            }
        }
    }
}

/// A branch's output norm, the residual add and the next norm in one pass, against the
/// reference; the sum within one rounding of the normed branch's.
#[test]
fn norm_add_rms_norm_matches_the_reference() {
    for (name, device) in devices() {
        let mut rng = Rng(8);
        let (rows, dim) = (3, 130);
        let x = random(&mut rng, rows * dim, 3.0);
        let h = random(&mut rng, rows * dim, 3.0);
        let (wh, w) = (random(&mut rng, dim, 2.0), random(&mut rng, dim, 2.0));
        let (sum, normed) = fused::norm_add_rms_norm(
            tensor(&x, [rows, dim], &device),
            tensor(&h, [rows, dim], &device),
            tensor(&wh, [dim], &device),
            tensor(&w, [dim], &device),
            1e-6,
        );
        let h: Vec<f64> = h.iter().map(|&v| f64::from(v)).collect();
        let want_sum: Vec<f64> = rms_norm_reference(&h, &wh, 1e-6)
            .iter()
            .zip(&x)
            .map(|(h, &x)| f64::from(x) + h)
            .collect();
        let sum = read(sum);
        assert_close(&format!("{name} x + norm(h)"), &sum, &want_sum, 1e-5, 1e-5);
        let sum: Vec<f64> = sum.iter().map(|&v| f64::from(v)).collect();
        let want = rms_norm_reference(&sum, &w, 1e-6);
        assert_close(
            &format!("{name} norm(x + norm(h))"),
            &read(normed),
            &want,
            1e-5,
            1e-6,
        );
    }
}

#[cfg(feature = "wgpu")]
/// Attention of `q` (`[tokens, heads, dim]`) over caches `[kv, capacity, dim]`, as llama.cpp
/// computes it: `f16` queries, `f16` probabilities.
#[allow(clippy::too_many_arguments)]
fn attention_reference(
    q: &[f32],
    keys: &[f32],
    values: &[f32],
    (tokens, heads, kv, capacity, dim): (usize, usize, usize, usize, usize),
    start: usize,
    window: usize,
    scale: f64,
) -> Vec<f64> {
    let mut out = vec![0.0; tokens * heads * dim];
    for t in 0..tokens {
        let position = start + t;
        let first = if window > 0 {
            (position + 1).saturating_sub(window)
        } else {
            0
        };
        for h in 0..heads {
            let g = h / (heads / kv);
            let qrow: Vec<f64> = (0..dim)
                .map(|d| round16(f64::from(q[(t * heads + h) * dim + d])))
                .collect();
            let scores: Vec<f64> = (first..=position)
                .map(|j| {
                    let k = &keys[(g * capacity + j) * dim..][..dim];
                    scale
                        * qrow
                            .iter()
                            .zip(k)
                            .map(|(a, &b)| a * f64::from(b))
                            .sum::<f64>()
                })
                .collect();
            let max = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let sum: f64 = scores.iter().map(|s| (s - max).exp()).sum();
            for (n, j) in (first..=position).enumerate() {
                let p = round16((scores[n] - max).exp() / sum);
                for d in 0..dim {
                    out[(t * heads + h) * dim + d] +=
                        p * f64::from(values[(g * capacity + j) * dim + d]);
                }
            }
        }
    }
    out
}

#[test]
#[cfg(feature = "wgpu")]
fn attention_matches_the_reference_with_and_without_a_window() {
    let Some(device) = common::wgpu_device() else {
        return;
    };
    let device = &device;
    let mut rng = Rng(4);
    // 70 positions: more keys than units, so the chunked pass runs twice; dim 80 needs two
    // columns per unit for some units and one for others. 2,100 positions: more scores than
    // a cube keeps in shared memory, so its passes compute them again. One token over 1,291
    // positions (or a window of 700): decoding split across cubes of 256 keys, the last
    // split partial. A head of 78 values: the scores' last products after their runs of four.
    // One token is also split more than its keys need (a split with no keys), and split where
    // one cube a head would do (the warm-up's launch over one position).
    for (tokens, capacity, start, windows, dim) in [
        (3, 72, 67, [0, 5], 80),
        (3, 2100, 2095, [0, 2060], 80),
        (1, 1300, 1290, [0, 700], 80),
        (2, 300, 290, [0, 100], 78),
        (1, 300, 290, [0, 100], 78),
        (1, 1, 0, [0, 1], 64),
    ] {
        let (heads, kv) = (6, 2);
        let q = random(&mut rng, tokens * heads * dim, 1.0);
        let f16_values = |rng: &mut Rng| -> Vec<f32> {
            random(rng, kv * capacity * dim, 1.0)
                .into_iter()
                .map(|v| f16::from_f32(v).to_f32())
                .collect()
        };
        let keys = f16_values(&mut rng);
        let values = f16_values(&mut rng);
        let scale = 1.0 / (dim as f64).sqrt();
        let mut runs = Vec::new();
        for window in windows {
            let needed = fused::attention_splits(tokens, start, window);
            runs.push((window, needed));
            if tokens == 1 {
                runs.push((window, needed + 1));
            }
        }
        for (window, splits) in runs {
            let attend = |q: Tensor<3>| {
                read(fused::attention(
                    q,
                    tensor(&keys, [kv, capacity, dim], device),
                    tensor(&values, [kv, capacity, dim], device),
                    splits,
                    &position_tensor(start, device),
                    window,
                    scale as f32,
                ))
            };
            let got = attend(tensor(&q, [tokens, heads, dim], device));
            let want = attention_reference(
                &q,
                &keys,
                &values,
                (tokens, heads, kv, capacity, dim),
                start,
                window,
                scale,
            );
            // A probability that lands beside an f16 rounding boundary may round the other
            // way: one f16 step (2⁻¹¹ relative) of one weight of a value below 1.
            assert_close(
                &format!(
                    "attention, {start} + {tokens} positions, window {window}, {splits} splits"
                ),
                &got,
                &want,
                1e-3,
                1e-3,
            );
            // The queries as a prefill has them: the first columns of each token's Q/K/V
            // row (here 64 more values a row, a view rather than a copy), read in place.
            let extra = 64;
            let rows: Vec<f32> = (0..tokens)
                .flat_map(|t| {
                    let row = &q[t * heads * dim..(t + 1) * heads * dim];
                    row.iter().copied().chain((0..extra).map(|i| i as f32))
                })
                .collect();
            let in_rows = tensor(&rows, [tokens, heads * dim + extra], device)
                .narrow(1, 0, heads * dim)
                .reshape([tokens, heads, dim]);
            let from_rows = attend(in_rows);
            assert!(
                from_rows
                    .iter()
                    .zip(&got)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "attention over queries in wider rows, {start} + {tokens}, window {window}, {splits} splits"
            );
        }
    }
}

#[test]
fn gated_activations_match_the_reference() {
    for (name, device) in devices() {
        gated_activations_match_the_reference_on(name, &device);
    }
}

fn gated_activations_match_the_reference_on(name: &str, device: &Device) {
    let mut rng = Rng(5);
    let n = 300;
    let mut gate = random(&mut rng, n, 12.0);
    gate[0] = 10.0;
    gate[1] = -10.0;
    gate[2] = 9.99;
    let up = random(&mut rng, n, 2.0);
    for gelu in [false, true] {
        let got = read(fused::gated(
            tensor(&gate, [3, n / 3], device),
            tensor(&up, [3, n / 3], device),
            gelu,
        ));
        let want: Vec<f64> = gate
            .iter()
            .zip(&up)
            .map(|(&g, &u)| {
                let g = f64::from(g);
                let a = if !gelu {
                    g / (1.0 + (-g).exp())
                } else if g >= 10.0 {
                    g
                } else if g <= -10.0 {
                    0.0
                } else {
                    let x = round16(g);
                    let inner = (x + 0.044715 * x * x * x) * (2.0 / std::f64::consts::PI).sqrt();
                    round16(0.5 * x * (1.0 + inner.tanh()))
                };
                a * f64::from(u)
            })
            .collect();
        // GELU's result is an f16: a value beside a rounding boundary may land one step
        // (2⁻¹⁰ relative) away.
        let relative = if gelu { 1e-3 } else { 1e-5 };
        assert_close(
            &format!("{name} {}", if gelu { "gelu" } else { "silu" }),
            &got,
            &want,
            relative,
            1e-6,
        );
    }
}
