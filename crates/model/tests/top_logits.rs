//! `top_logits` on every device against a host sort: the `k` largest logits of a row and their
//! columns, largest first and the lower column first among equals (greedy decoding's choice
//! and a top-k sampler's candidates, read back instead of every logit), with the columns
//! outside a mask left out. Values drawn from a few dozen levels, so that most are tied with
//! others; rows as long as Gemma 3's vocabulary.

mod common;

use burn::tensor::{Tensor, TensorData};
use common::wgpu_device;
use stampo_model::{Device, DeviceKind, MAX_TOP, host_top, read_top, top_logits};
use stampo_quant::sample::Rng;

/// The `k` largest of `row` outside `excluded` and above -inf, by value then column.
fn sorted_top(row: &[f32], excluded: &[u32], k: usize) -> Vec<(u32, f32)> {
    let mut all: Vec<(u32, f32)> = row
        .iter()
        .enumerate()
        .map(|(c, &v)| (c as u32, v))
        .filter(|(c, v)| !excluded.contains(c) && *v != f32::NEG_INFINITY)
        .collect();
    all.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    all.truncate(k);
    all
}

fn check(device: &Device, name: &str) {
    let mut rng = Rng(0x70b);
    for n in [5usize, 1000, 262_144] {
        let row: Vec<f32> = (0..n)
            .map(|_| ((rng.bits() % 40) as f32 - 20.0) * 0.25)
            .collect();
        let max = row.iter().copied().fold(f32::MIN, f32::max);
        let best: Vec<u32> = (0..n as u32).filter(|&c| row[c as usize] == max).collect();
        let excluded_sets = [
            Vec::new(),
            // Every column holding the largest value but the last one.
            best[..best.len() - 1].to_vec(),
            // Every one holding it: the next value leads.
            best.clone(),
            vec![0, 1, (n / 2) as u32],
            (1..n as u32).collect(),
            (0..n as u32).collect(),
        ];
        for excluded in &excluded_sets {
            let logits = || Tensor::<2>::from_data(TensorData::new(row.clone(), [1, n]), device);
            let mut mask = vec![u32::MAX; n.div_ceil(32)];
            for &c in excluded {
                mask[c as usize / 32] &= !(1 << (c % 32));
            }
            for k in [1, 3, 40, MAX_TOP] {
                let want = sorted_top(&row, excluded, k);
                let top = top_logits(logits(), Some(&mask), k).expect("top logits");
                let got = read_top(top).expect("readback");
                let case = format!("{name}: {n} logits, {} excluded, k {k}", excluded.len());
                assert_eq!(got, want, "{case}");
                if excluded.is_empty() {
                    let top = top_logits(logits(), None, k).expect("top logits");
                    assert_eq!(read_top(top).expect("readback"), want, "{case}, no mask");
                }
            }
        }
    }
    // Every k over a row as long as Gemma 3's vocabulary, and a rising row (every value a
    // unit reads is kept: the most insertions).
    let mut rng = Rng(0x70b);
    let n = 262_144;
    let row: Vec<f32> = (0..n)
        .map(|_| ((rng.bits() % 40) as f32 - 20.0) * 0.25)
        .collect();
    let rising: Vec<f32> = (0..n).map(|c| c as f32).collect();
    for k in 1..=MAX_TOP {
        for row in [&row, &rising] {
            let logits = Tensor::<2>::from_data(TensorData::new(row.clone(), [1, n]), device);
            let top = read_top(top_logits(logits, None, k).expect("top logits")).expect("readback");
            assert_eq!(top, sorted_top(row, &[], k), "{name}: k {k}");
        }
    }
    // A row of -inf (every token masked by the model itself) has no candidate.
    let row = vec![f32::NEG_INFINITY; 70];
    let logits = Tensor::<2>::from_data(TensorData::new(row, [1, 70]), device);
    let top = top_logits(logits, None, 3).expect("top logits");
    assert_eq!(read_top(top).expect("readback"), [], "{name}");
    // The largest values at the end of a long row (where burn's reduction missed them); a
    // mask too short for the row and a k out of range are errors.
    for at in [262_141, 262_143] {
        let mut row = vec![0.0f32; 262_144];
        row[at] = 1.0;
        row[at - 7] = 0.5;
        let logits = || Tensor::<2>::from_data(TensorData::new(row.clone(), [1, 262_144]), device);
        let top = read_top(top_logits(logits(), None, 2).expect("top logits")).expect("readback");
        assert_eq!(top, [(at as u32, 1.0), (at as u32 - 7, 0.5)], "{name}");
        assert!(
            top_logits(logits(), Some(&[u32::MAX; 8191]), 1).is_err(),
            "{name}"
        );
        assert!(top_logits(logits(), None, 0).is_err(), "{name}");
        assert!(top_logits(logits(), None, MAX_TOP + 1).is_err(), "{name}");
    }
}

#[test]
fn cpu_top_logits_equal_a_sort() {
    let device = DeviceKind::Cpu.device().expect("cpu device");
    check(&device, "cpu");
}

#[test]
fn wgpu_top_logits_equal_a_sort() {
    let Some(device) = wgpu_device() else { return };
    check(&device, "wgpu");
}

/// The host's selection alone, beyond what a device chooses: any `k` (a sampler's `top_k` of
/// hundreds, or more than the row holds), NaN never chosen, and -0 below 0 as a sort puts them.
#[test]
fn host_top_equals_a_sort_for_any_k() {
    let mut rng = Rng(0x7e57);
    let mut row: Vec<f32> = (0..5_000)
        .map(|_| ((rng.bits() % 40) as f32 - 20.0) * 0.25)
        .collect();
    row[7] = f32::NAN;
    row[8] = -0.0;
    row[9] = 0.0;
    row[10] = f32::NEG_INFINITY;
    let mut mask = vec![u32::MAX; row.len().div_ceil(32)];
    let excluded: Vec<u32> = (0..row.len() as u32).filter(|c| c % 3 == 0).collect();
    for &c in &excluded {
        mask[c as usize / 32] &= !(1 << (c % 32));
    }
    let sorted = |excluded: &[u32], k: usize| -> Vec<(u32, f32)> {
        let mut all: Vec<(u32, f32)> = sorted_top(&row, excluded, row.len())
            .into_iter()
            .filter(|(_, v)| !v.is_nan())
            .collect();
        all.truncate(k);
        all
    };
    let bits = |v: Vec<(u32, f32)>| -> Vec<(u32, u32)> {
        v.into_iter().map(|(c, x)| (c, x.to_bits())).collect()
    };
    for k in [0, 1, 40, 65, 700, 4_999, 5_000, 9_000] {
        assert_eq!(bits(host_top(&row, None, k)), bits(sorted(&[], k)), "k {k}");
        assert_eq!(
            bits(host_top(&row, Some(&mask), k)),
            bits(sorted(&excluded, k)),
            "k {k}, masked"
        );
    }
    // The zeros in a sort's order, whatever k cuts between them.
    let zeros = [0.0f32, -0.0, 0.0, -0.0];
    assert_eq!(
        bits(host_top(&zeros, None, 2)),
        bits(vec![(0, 0.0), (2, 0.0)])
    );
}
