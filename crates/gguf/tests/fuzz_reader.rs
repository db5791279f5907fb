//! A mutation fuzzer for the reader, run briefly on every test run (CI included): valid
//! files are corrupted at random (bytes flipped, counts and lengths replaced by extreme
//! values, truncated, spliced) and read every way there is (whole, header only, streamed
//! in random chunks, metadata walked, tensors dequantised). Nothing may panic, and no
//! single allocation while parsing may exceed a small multiple of the file's size.
//!
//! `STAMPO_FUZZ_ITERS` sets the number of mutants (default 3000); `STAMPO_FUZZ_SEED` the seed.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use stampo_gguf::stream::StreamingGguf;
use stampo_gguf::writer::{GgufWriter, OwnedValue};
use stampo_gguf::{GgmlType, Gguf, Value, ValueType, dequantize_to_vec};

/// Records the largest single allocation while `TRACK` is on.
struct Counting;
static TRACK: AtomicBool = AtomicBool::new(false);
static LARGEST: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if TRACK.load(Ordering::Relaxed) {
            LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        }
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if TRACK.load(Ordering::Relaxed) {
            LARGEST.fetch_max(new_size, Ordering::Relaxed);
        }
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// xorshift64*: a small deterministic generator.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545F4914F6CDD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn seeds() -> Vec<Vec<u8>> {
    let mut w = GgufWriter::new();
    w.add("general.architecture", OwnedValue::String("llama".into()))
        .add("general.alignment", OwnedValue::U32(64))
        .add(
            "tokenizer.ggml.tokens",
            OwnedValue::strings(["a", "bc", "<s>", "def"]),
        )
        .add(
            "tokenizer.ggml.scores",
            OwnedValue::f32s([0.0, -1.0, -2.0, -3.0]),
        )
        .add(
            "nested",
            OwnedValue::Array(
                ValueType::Array,
                vec![OwnedValue::i32s([1, 2]), OwnedValue::strings(["x"])],
            ),
        )
        .add("flag", OwnedValue::Bool(true))
        .add("big", OwnedValue::U64(u64::MAX));
    w.add_tensor(
        "q4k",
        GgmlType::Q4_K,
        &[256, 2],
        (0..288).map(|i| (i * 7) as u8).collect(),
    );
    w.add_tensor(
        "q6k",
        GgmlType::Q6_K,
        &[256],
        (0..210).map(|i| (i * 13) as u8).collect(),
    );
    w.add_tensor("f16", GgmlType::F16, &[4, 2], vec![0x3c; 16]);
    w.add_tensor("q8_0", GgmlType::Q8_0, &[32], vec![1; 34]);
    vec![w.to_bytes(), stampo_gguf::testing::tiny_file()]
}

fn mutate(rng: &mut Rng, seed: &[u8]) -> Vec<u8> {
    let mut b = seed.to_vec();
    for _ in 0..1 + rng.below(4) {
        if b.is_empty() {
            break;
        }
        match rng.below(6) {
            0 => {
                let i = rng.below(b.len());
                b[i] ^= 1 << rng.below(8);
            }
            1 => {
                let i = rng.below(b.len());
                b[i] = rng.next() as u8;
            }
            2 => {
                // A count, length, dimension or offset replaced by an extreme value.
                let i = rng.below(b.len().saturating_sub(8).max(1));
                let v: u64 = match rng.below(6) {
                    0 => 0,
                    1 => u64::MAX,
                    2 => 1 << rng.below(64),
                    3 => rng.next(),
                    4 => rng.below(64) as u64,
                    _ => (b.len() + rng.below(64)) as u64,
                };
                let end = (i + 8).min(b.len());
                b[i..end].copy_from_slice(&v.to_le_bytes()[..end - i]);
            }
            3 => b.truncate(rng.below(b.len())),
            4 => {
                let i = rng.below(b.len());
                let j = rng.below(b.len());
                let (lo, hi) = (i.min(j), i.max(j));
                let piece = b[lo..hi].to_vec();
                let at = rng.below(b.len());
                b.splice(at..at, piece);
            }
            _ => {
                let i = rng.below(b.len());
                let n = rng.below(b.len() - i + 1);
                b.drain(i..i + n);
            }
        }
    }
    b
}

fn walk(v: &Value<'_>) -> usize {
    match v {
        Value::Array(a) => a.iter().map(|e| walk(&e)).sum::<usize>() + 1,
        Value::String(s) => s.as_bytes().len() + usize::from(s.to_str().is_some()),
        _ => 1,
    }
}

fn exercise(rng: &mut Rng, bytes: &[u8]) {
    TRACK.store(true, Ordering::Relaxed);
    LARGEST.store(0, Ordering::Relaxed);
    let parsed = Gguf::parse(bytes);
    let header = Gguf::parse_header(bytes);
    if let Ok(g) = &header {
        for (k, v) in g.metadata().iter() {
            std::hint::black_box((k, walk(v)));
        }
        let _ = g.architecture();
        let _ = g.metadata().arch_optional::<u32>("context_length");
    }
    TRACK.store(false, Ordering::Relaxed);
    let largest = LARGEST.load(Ordering::Relaxed);
    assert!(
        largest <= 16 * bytes.len() + 4096,
        "allocation of {largest} bytes for a {}-byte file",
        bytes.len()
    );

    if let Ok(g) = parsed {
        for t in g.tensors() {
            let data = g.tensor_data(t);
            assert_eq!(data.len() as u64, t.size);
            if t.ty.can_dequantize() && data.len() < 1 << 20 {
                let v = dequantize_to_vec(t.ty, data).unwrap();
                assert_eq!(v.len() as u64, t.elements());
            }
        }
    }
    let mut s = StreamingGguf::new();
    let mut pos = 0;
    let mut ok = true;
    while pos < bytes.len() && ok {
        let n = 1 + rng.below(97);
        let end = (pos + n).min(bytes.len());
        ok = s.push(&bytes[pos..end], &mut |_| Ok(())).is_ok();
        pos = end;
    }
    if ok {
        let _ = s.finish();
    }
}

#[test]
fn mutated_files_never_panic() {
    let iters: usize = std::env::var("STAMPO_FUZZ_ITERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3000);
    let seed: u64 = std::env::var("STAMPO_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5EED_CAFE);
    let mut rng = Rng(seed | 1);
    let seeds = seeds();
    for s in &seeds {
        exercise(&mut rng, s);
    }
    for i in 0..iters {
        let s = &seeds[rng.below(seeds.len())];
        let m = mutate(&mut rng, s);
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            exercise(&mut Rng(i as u64 + 1), &m)
        }));
        if result.is_err() {
            let path = std::env::temp_dir().join(format!("stampo-fuzz-{seed}-{i}.gguf"));
            std::fs::write(&path, &m).unwrap();
            panic!(
                "mutant {i} (seed {seed}) panicked; saved to {}",
                path.display()
            );
        }
    }
}
