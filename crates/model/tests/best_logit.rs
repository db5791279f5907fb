//! `best_logit` on every device against a host selection: the largest logit of a row and its
//! column, the lowest column among equals (greedy decoding's choice, read back instead of
//! every logit), with columns outside a mask left out. Values drawn from a few dozen levels, so
//! that most are tied with others; rows as long as Gemma 3's vocabulary.

mod common;

use burn::tensor::{Tensor, TensorData};
use common::wgpu_device;
use stampo_model::{Device, DeviceKind, best_logit, read_best};
use stampo_quant::sample::Rng;

/// The largest of `row` outside `excluded` and above -inf, the lowest column among equals.
fn sorted_best(row: &[f32], excluded: &[u32]) -> Option<(u32, f32)> {
    let mut all: Vec<(u32, f32)> = row
        .iter()
        .enumerate()
        .map(|(c, &v)| (c as u32, v))
        .filter(|(c, v)| !excluded.contains(c) && *v != f32::NEG_INFINITY)
        .collect();
    all.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    all.first().copied()
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
            // Every one holding it: the next value wins.
            best.clone(),
            vec![0, 1, (n / 2) as u32],
            (1..n as u32).collect(),
            (0..n as u32).collect(),
        ];
        for excluded in &excluded_sets {
            let want = sorted_best(&row, excluded);
            let logits = || Tensor::<2>::from_data(TensorData::new(row.clone(), [1, n]), device);
            let mut mask = vec![u32::MAX; n.div_ceil(32)];
            for &c in excluded {
                mask[c as usize / 32] &= !(1 << (c % 32));
            }
            let best = best_logit(logits(), Some(&mask)).expect("best logit");
            let got = read_best(best).expect("readback");
            assert_eq!(got, want, "{name}: {n} logits, {} excluded", excluded.len());
            if excluded.is_empty() {
                let best = best_logit(logits(), None).expect("best logit");
                assert_eq!(
                    read_best(best).expect("readback"),
                    want,
                    "{name}: {n}, no mask"
                );
            }
        }
    }
    // A row of -inf (every token masked by the model itself) has no best.
    let row = vec![f32::NEG_INFINITY; 70];
    let logits = Tensor::<2>::from_data(TensorData::new(row, [1, 70]), device);
    let best = best_logit(logits, None).expect("best logit");
    assert_eq!(read_best(best).expect("readback"), None, "{name}");
    // The largest value at the end of a long row (where burn's reduction missed it), and a
    // mask too short for the row.
    for at in [262_141, 262_143] {
        let mut row = vec![0.0f32; 262_144];
        row[at] = 1.0;
        let logits = || Tensor::<2>::from_data(TensorData::new(row.clone(), [1, 262_144]), device);
        let best = best_logit(logits(), None).expect("best logit");
        assert_eq!(
            read_best(best).expect("readback"),
            Some((at as u32, 1.0)),
            "{name}"
        );
        assert!(
            best_logit(logits(), Some(&[u32::MAX; 8191])).is_err(),
            "{name}"
        );
    }
}

#[test]
fn cpu_best_logit_equals_a_host_selection() {
    let device = DeviceKind::Cpu.device().expect("cpu device");
    check(&device, "cpu");
}

#[test]
fn wgpu_best_logit_equals_a_host_selection() {
    let Some(device) = wgpu_device() else { return };
    check(&device, "wgpu");
}
