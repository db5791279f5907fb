//! Reading a GGUF file as it arrives (a browser download, a network stream): the header
//! and tensor table are parsed as soon as their bytes are in, and tensor data is handed
//! to the caller chunk by chunk, straight from the incoming buffers. Only the header is
//! kept; the file is never held whole, let alone twice.
//!
//! ```
//! use stampo_gguf::stream::{Event, StreamingGguf};
//! # let file = stampo_gguf::testing::tiny_file();
//! let mut reader = StreamingGguf::new();
//! let mut weights: Vec<Vec<u8>> = Vec::new();
//! for chunk in file.chunks(7) {
//!     reader.push(chunk, &mut |event| {
//!         match event {
//!             Event::Header(gguf) => weights = gguf.tensors().iter().map(|t| Vec::with_capacity(t.size as usize)).collect(),
//!             Event::TensorData { index, bytes, .. } => weights[index].extend_from_slice(bytes),
//!             Event::TensorDone { .. } => {}
//!         }
//!         Ok(())
//!     })?;
//! }
//! reader.finish()?;
//! # Ok::<(), stampo_gguf::GgufError>(())
//! ```

use crate::error::{GgufError, Result};
use crate::file::Gguf;

/// What the streaming reader reports.
#[derive(Debug)]
pub enum Event<'a, 'g> {
    /// The header and tensor table are complete (sent once, before any tensor data).
    Header(&'a Gguf<'g>),
    /// A piece of a tensor's data: `bytes` go at `offset` within tensor `index`
    /// (its position in the tensor table). Pieces of a tensor arrive in order.
    TensorData {
        index: usize,
        offset: u64,
        bytes: &'a [u8],
    },
    /// Tensor `index` has received all its bytes.
    TensorDone { index: usize },
}

/// A tensor's absolute byte range in the file.
#[derive(Debug, Clone, Copy)]
struct Span {
    start: u64,
    end: u64,
    index: usize,
}

/// The incremental reader. Feed it with [`StreamingGguf::push`], end with
/// [`StreamingGguf::finish`].
#[derive(Debug, Default)]
pub struct StreamingGguf {
    /// Bytes up to the start of the data section (all we keep).
    header: Vec<u8>,
    /// Buffer length at which to try parsing again.
    next_try: usize,
    /// Once parsed: tensors by file position, the data section start, the next span.
    spans: Vec<Span>,
    data_offset: u64,
    next_span: usize,
    parsed: bool,
    /// Bytes received so far.
    pos: u64,
}

impl StreamingGguf {
    /// A reader waiting for the first bytes.
    pub fn new() -> Self {
        Self::default()
    }

    /// Bytes received so far.
    pub fn bytes_received(&self) -> u64 {
        self.pos
    }

    /// Whether the header and tensor table have been parsed.
    pub fn has_header(&self) -> bool {
        self.parsed
    }

    /// The parsed header and tensor table (re-read from the kept header bytes, without
    /// copying), once [`Event::Header`] has been sent.
    pub fn header(&self) -> Option<Gguf<'_>> {
        if !self.parsed {
            return None;
        }
        Gguf::parse_header(&self.header).ok()
    }

    /// Feeds the next bytes of the file. `sink` gets the events they complete; an error
    /// from `sink` stops the stream and is returned.
    pub fn push(
        &mut self,
        chunk: &[u8],
        sink: &mut dyn FnMut(Event<'_, '_>) -> Result<()>,
    ) -> Result<()> {
        if self.parsed {
            self.dispatch(chunk, sink)?;
            self.pos += chunk.len() as u64;
            return Ok(());
        }
        self.header.extend_from_slice(chunk);
        self.pos += chunk.len() as u64;
        if self.header.len() < self.next_try {
            return Ok(());
        }
        let (data_offset, spans) = match Gguf::parse_header(&self.header) {
            Ok(g) => (
                g.data_offset(),
                g.tensors()
                    .iter()
                    .map(|t| Span {
                        start: g.data_offset() + t.offset,
                        end: g.data_offset() + t.offset + t.size,
                        index: t.index,
                    })
                    .collect::<Vec<_>>(),
            ),
            Err(GgufError::Truncated { offset, needed, .. }) => {
                self.next_try = (offset + needed) as usize;
                return Ok(());
            }
            Err(GgufError::CountTooLarge {
                offset, min_bytes, ..
            }) => {
                // A count that does not fit yet: wait until it can.
                self.next_try = usize::try_from(offset.saturating_add(8).saturating_add(min_bytes))
                    .unwrap_or(usize::MAX);
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        // The header is complete. Bytes past the data section start are tensor data.
        let mut spans = spans;
        spans.sort_by_key(|s| s.start);
        self.spans = spans;
        self.data_offset = data_offset;
        self.parsed = true;
        let keep = (data_offset as usize).min(self.header.len());
        let rest = self.header.split_off(keep);
        self.header.shrink_to_fit();
        {
            let g = Gguf::parse_header(&self.header)?;
            sink(Event::Header(&g))?;
        }
        let before = self.pos - rest.len() as u64;
        let saved = self.pos;
        self.pos = before;
        self.dispatch(&rest, sink)?;
        self.pos = saved;
        Ok(())
    }

    /// Hands the tensor bytes in `chunk` (which starts at file position `self.pos`) to `sink`.
    fn dispatch(
        &mut self,
        chunk: &[u8],
        sink: &mut dyn FnMut(Event<'_, '_>) -> Result<()>,
    ) -> Result<()> {
        let start = self.pos;
        let end = start + chunk.len() as u64;
        while let Some(span) = self.spans.get(self.next_span).copied() {
            // An empty tensor at the very end of this chunk is done now; others wait.
            if span.start > end || (span.start == end && span.end > span.start) {
                break;
            }
            let from = span.start.max(start);
            let to = span.end.min(end);
            if to > from {
                let bytes = &chunk[(from - start) as usize..(to - start) as usize];
                sink(Event::TensorData {
                    index: span.index,
                    offset: from - span.start,
                    bytes,
                })?;
            }
            if span.end <= end {
                sink(Event::TensorDone { index: span.index })?;
                self.next_span += 1;
            } else {
                break;
            }
        }
        Ok(())
    }

    /// Ends the stream: the parsed header, or an error if the header never completed or a
    /// tensor is short.
    pub fn finish(&self) -> Result<Gguf<'_>> {
        if !self.parsed {
            // Parse what arrived to report the precise problem.
            Gguf::parse_header(&self.header)?;
            return Err(GgufError::Stream {
                reason: "the header did not complete".into(),
            });
        }
        if let Some(span) = self.spans.get(self.next_span) {
            let g = Gguf::parse_header(&self.header)?;
            let name = g
                .tensors()
                .get(span.index)
                .map(|t| t.name.to_string())
                .unwrap_or_default();
            return Err(GgufError::Truncated {
                offset: self.pos,
                needed: span.end.saturating_sub(self.pos),
                what: "tensor data",
                context: format!(" (tensor '{name}')"),
            });
        }
        Gguf::parse_header(&self.header)
    }
}
