//! Random matrices in every block format, with realistic `f16` scales: test data for the
//! kernels here and for the device kernels in `stampo-model`, which must agree on it.

use half::f16;

use crate::QuantFormat;

/// xorshift64*: reproducible test data without a dependency.
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits.
    pub fn bits(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in [-1, 1).
    pub fn float(&mut self) -> f32 {
        (self.bits() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
}

fn put_f16(bytes: &mut [u8], at: usize, v: f32) {
    bytes[at..at + 2].copy_from_slice(&f16::from_f32(v).to_le_bytes());
}

/// `rows` rows of `cols` values in `format` (`cols` a multiple of the block length): random
/// quants, scales of realistic size.
pub fn random_matrix(format: QuantFormat, rows: usize, cols: usize, rng: &mut Rng) -> Vec<u8> {
    let n_blocks = rows * cols / format.block_len();
    let bb = format.block_bytes();
    let mut bytes = vec![0u8; n_blocks * bb];
    match format {
        QuantFormat::F32 => {
            for c in bytes.chunks_exact_mut(4) {
                c.copy_from_slice(&rng.float().to_le_bytes());
            }
        }
        QuantFormat::F16 => {
            for c in bytes.chunks_exact_mut(2) {
                c.copy_from_slice(&f16::from_f32(rng.float()).to_le_bytes());
            }
        }
        _ => {
            for block in bytes.chunks_exact_mut(bb) {
                for b in block.iter_mut() {
                    *b = rng.bits() as u8;
                }
                let scale = 0.01 + 0.02 * rng.float().abs();
                match format {
                    QuantFormat::Q4_0 | QuantFormat::Q5_0 | QuantFormat::Q8_0 => {
                        put_f16(block, 0, scale)
                    }
                    QuantFormat::Q4_1 => {
                        put_f16(block, 0, scale);
                        put_f16(block, 2, -0.1 * rng.float().abs());
                    }
                    QuantFormat::Q4K | QuantFormat::Q5K => {
                        put_f16(block, 0, scale / 16.0);
                        put_f16(block, 2, scale / 32.0);
                    }
                    QuantFormat::Q6K => put_f16(block, 208, scale / 32.0),
                    // Handled above.
                    QuantFormat::F32 | QuantFormat::F16 => {}
                }
            }
        }
    }
    bytes
}
