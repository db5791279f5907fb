//! Decoding steps recorded once and replayed, on the wgpu device.
//!
//! A decoding step launches the same ~250 kernels (8 or 9 a layer) with the same buffers from
//! one token to the next; only the token and its position change. Launching each through burn,
//! CubeCL and wgpu costs the host about 8 µs (wgpu's noop backend, bench/README.md), so the
//! host, not the GPU, bounds a small model's decoding. CubeCL records a sequence of launches
//! into a *graph* (on wgpu a software one: pipelines, bindings, uniforms and bind groups
//! resolved once) whose replay only re-encodes the dispatches. Here a cache's first decoding
//! step runs under CubeCL's capture (a warm-up run, then the recorded run, which executes
//! nothing) and is computed by the recording's first replay; each later step writes its
//! position and token into the cache's step buffer (`[start, token]`, where the kernels read
//! them: the embedding lookup, `quant::cube::owned_row_into`, and the rotation, cache write and
//! attention), replays, and copies the recorded output out.
//!
//! A graph holds for as long as a step's launches are the same: the same model and cache
//! buffers (the graph lives in the [`Cache`] and names the model it was recorded with) and the
//! same attention splits (they change when the visible keys cross a multiple of 256, where the
//! next step records again). `STAMPO_WGPU_GRAPHS=0` or [`Cache::set_step_graphs`] turns replay
//! off; a capture the runtime refuses turns it off for that cache, and the step runs as usual.

use burn::backend::tensor::{FloatTensor, IntTensor};
use burn::backend::{Backend, Cube, DispatchDevice, backend_extension};
use burn::tensor::{DType, Device, Int, Tensor, TensorData};
use burn_cubecl::kernel::into_contiguous;
use cubecl::prelude::*;

use crate::error::{ModelError, Result};
use crate::fused::{THREADS, grid_of};
use crate::model::{Cache, Transformer};
use crate::quant::{QLinear, QuantLayout};

/// What a replayed step needs beyond the layers' kernels.
#[backend_extension(Cube)]
pub trait StepOps: Backend {
    /// Writes `src`'s values over `dst`'s (same number of values), in `dst`'s own buffer
    /// whoever else holds it, and returns `dst`.
    fn step_copy_into(src: FloatTensor<Self>, dst: FloatTensor<Self>) -> FloatTensor<Self>;

    /// Writes `values` into `step`'s `u32`s, in place, and returns it.
    fn step_write(step: IntTensor<Self>, values: Vec<u32>) -> IntTensor<Self>;

    /// The embedding row of the token id at `step[at]` into `out` (`[1, cols]`) if that id is
    /// in the part `blocks` (rows `first..`, the table's last part when `last`), and `out`.
    #[allow(clippy::too_many_arguments)]
    fn step_embed_part(
        blocks: IntTensor<Self>,
        step: IntTensor<Self>,
        out: FloatTensor<Self>,
        at: usize,
        first: usize,
        layout: QuantLayout,
        last: bool,
    ) -> FloatTensor<Self>;
}

#[cube(launch)]
fn copy_kernel(src: &[f32], dst: &mut [f32], len: u32) {
    let at = ABSOLUTE_POS as u32;
    if at < len {
        dst[at as usize] = src[at as usize];
    }
}

impl StepOps for Cube {
    fn step_copy_into(src: FloatTensor<Self>, dst: FloatTensor<Self>) -> FloatTensor<Self> {
        let src = into_contiguous(src);
        let len = src
            .meta
            .shape()
            .num_elements()
            .min(dst.meta.shape().num_elements());
        // SAFETY: both buffers are bound with `len` values, at most either tensor's length;
        // one unit per value.
        unsafe {
            copy_kernel::launch(
                &src.client,
                grid_of((len as u32).div_ceil(THREADS)),
                CubeDim::new_1d(THREADS),
                BufferArg::from_raw_parts(src.handle.clone(), len),
                BufferArg::from_raw_parts(dst.handle.clone(), len),
                len as u32,
            );
        }
        dst
    }

    fn step_write(step: IntTensor<Self>, values: Vec<u32>) -> IntTensor<Self> {
        // Queued behind the work already launched (CubeCL submits it before a write).
        step.client
            .write(&step.handle, cubecl::bytes::Bytes::from_elems(values));
        step
    }

    fn step_embed_part(
        blocks: IntTensor<Self>,
        step: IntTensor<Self>,
        out: FloatTensor<Self>,
        at: usize,
        first: usize,
        layout: QuantLayout,
        last: bool,
    ) -> FloatTensor<Self> {
        crate::quant::cube::owned_row_into(blocks, step, &out, at, first, layout, last);
        out
    }
}

/// A `[2]` `u32` step buffer, `[start, token]`: the kernels read the tokens' first position
/// from its first value, a replayed step's embedding lookup its token from the second.
pub(crate) fn step_tensor(device: &Device) -> Tensor<1, Int> {
    Tensor::from_data(TensorData::new(vec![0u32, 0], [2]), (device, DType::U32))
}

/// Writes `start` and `token` into a step buffer.
pub(crate) fn set_step(step: &Tensor<1, Int>, start: usize, token: u32) {
    let start = u32::try_from(start).unwrap_or(u32::MAX);
    let _ = <burn::backend::Dispatch as StepOps>::step_write(
        step.clone().into_dispatch(),
        vec![start, token],
    );
}

fn copy_into(src: Tensor<2>, dst: &Tensor<2>) {
    let _ = <burn::backend::Dispatch as StepOps>::step_copy_into(
        src.into_dispatch(),
        dst.clone().into_dispatch(),
    );
}

/// The embedding row of the token in `step[1]`, `[1, dim]`, whichever part of the table
/// holds it: one launch a part, none of them chosen by the host.
fn embed_step(table: &QLinear, step: &Tensor<1, Int>) -> Tensor<2> {
    let layout = table.layout;
    let out = Tensor::<2>::empty([1, layout.cols], &step.device()).into_dispatch();
    let parts = table.parts.len();
    let out = table
        .parts
        .iter()
        .enumerate()
        .fold(out, |out, (p, blocks)| {
            let (first, part) = table.part(p);
            <burn::backend::Dispatch as StepOps>::step_embed_part(
                blocks.clone().into_dispatch(),
                step.clone().into_dispatch(),
                out,
                1,
                first,
                part,
                p + 1 == parts,
            )
        });
    Tensor::from_dispatch(out)
}

/// What makes a recorded step's launches the ones a new step needs.
#[derive(Debug, Clone, PartialEq, Eq)]
struct StepKey {
    model: u64,
    /// Each layer's attention splits ([`crate::fused::attention_splits`]).
    splits: Vec<usize>,
}

/// A recorded decoding step.
pub(crate) struct StepGraph {
    // First, so that it goes before the buffers it names.
    graph: cubecl::client::Graph,
    key: StepKey,
    /// The final hidden state, `[1, dim]`, written by the last launch.
    output: Tensor<2>,
    /// Keeps every weight the recorded launches read alive for the graph's life (replay's
    /// contract), whatever becomes of the caller's model.
    _model: Transformer,
}

impl std::fmt::Debug for StepGraph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StepGraph").field("key", &self.key).finish()
    }
}

/// A cache's replay state on the wgpu device.
#[derive(Debug)]
pub(crate) struct StepState {
    /// The step buffer, `[start, token]` ([`step_tensor`]).
    pub(crate) buffer: Tensor<1, Int>,
    graph: Option<StepGraph>,
    pub(crate) enabled: bool,
    pub(crate) replays: u64,
}

impl StepState {
    pub(crate) fn new(buffer: Tensor<1, Int>) -> StepState {
        StepState {
            buffer,
            graph: None,
            enabled: enabled_by_default(),
            replays: 0,
        }
    }

    /// See [`Cache::step_graphs`].
    pub(crate) fn state(&self) -> &'static str {
        match (self.enabled, &self.graph) {
            (false, _) => "off",
            (true, Some(_)) => "recorded",
            (true, None) => "on",
        }
    }

    pub(crate) fn set_enabled(&mut self, on: bool) {
        self.enabled = on;
        if !on {
            self.graph = None;
        }
    }
}

/// Replay is on unless `STAMPO_WGPU_GRAPHS=0` (read once per process).
fn enabled_by_default() -> bool {
    #[cfg(not(target_family = "wasm"))]
    {
        static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *ON.get_or_init(|| std::env::var("STAMPO_WGPU_GRAPHS").as_deref() != Ok("0"))
    }
    #[cfg(target_family = "wasm")]
    true
}

/// One decoding step of `token` at `start` (checked by the caller against the capacity and
/// the vocabulary), replayed where the cache's graph fits it and recorded where none does: the
/// final hidden state, `[1, dim]`, in a tensor of its own. The caller moves the cache's position.
pub(crate) fn decode(
    model: &Transformer,
    token: u32,
    start: usize,
    cache: &mut Cache,
    step: &mut StepState,
) -> Result<Tensor<2>> {
    let key = StepKey {
        model: model.id(),
        splits: model.attention_splits(start),
    };
    set_step(&step.buffer, start, token);
    if let Some(recorded) = step.graph.as_ref().filter(|g| g.key == key) {
        step.replays += 1;
        return replay(recorded);
    }
    // Its pages come free for the new recording.
    step.graph = None;
    let buffer = step.buffer.clone();
    let launched = |cache: &mut Cache| {
        let x = embed_step(model.embedding(), &buffer);
        model.run_blocks(x, start, Some(&buffer), cache, false)
    };
    let device = model.device();
    let DispatchDevice::Cube(device) = device.as_dispatch() else {
        return Err(ModelError::DeviceLost {
            reason: "a step graph outside the wgpu device".to_string(),
        });
    };
    let client = device.client();
    if client.graph_prepare().is_err() {
        step.enabled = false;
        return Ok(launched(cache));
    }
    // The warm-up run CubeCL's capture asks for. Nothing may be allocated while recording
    // beyond what the warm-up run freed, so its output goes too (keeping it failed in the
    // browser, one row short); the replay below computes the step again, the same values
    // into the same cache positions.
    drop(launched(cache));
    let recorded = client.start_capture().and_then(|()| {
        let output = launched(cache);
        client.stop_capture().map(|graph| (graph, output))
    });
    match recorded {
        Ok((graph, output)) => {
            let recorded = step.graph.insert(StepGraph {
                graph,
                key,
                output,
                _model: model.clone(),
            });
            replay(recorded)
        }
        Err(_) => {
            // Closes a capture that was only prepared (a no-op otherwise).
            let _ = client.stop_capture();
            step.enabled = false;
            Ok(launched(cache))
        }
    }
}

/// Replays `recorded` (its step buffer written) and copies its output into a tensor of the
/// caller's.
fn replay(recorded: &StepGraph) -> Result<Tensor<2>> {
    // SAFETY: the graph's buffers are alive (the cache holds its caches and step buffer, the
    // graph its output and model) and used only from this stream: a forward pass runs on the
    // device's own thread (natively; wasm has one thread), and the cache is borrowed mutably.
    unsafe { recorded.graph.replay() }.map_err(device_lost)?;
    let output = Tensor::empty(recorded.output.dims(), &recorded.output.device());
    copy_into(recorded.output.clone(), &output);
    Ok(output)
}

fn device_lost(e: cubecl::server::ServerError) -> ModelError {
    ModelError::DeviceLost {
        reason: e.to_string(),
    }
}
