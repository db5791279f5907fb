//! Every budget of the grammar engine, in one place.
//!
//! Each budget bounds a cost that a hostile or careless grammar could otherwise make
//! unbounded; exceeding one is a [`GrammarError::LimitExceeded`](crate::GrammarError) that
//! names the field, never a hang or an out-of-memory abort.

/// Budgets for compiling and matching grammars.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest `m`/`n` in a repetition `x{m,n}`. Default 2000 (llama.cpp's
    /// `MAX_REPETITION_THRESHOLD`). Cost: a bounded repetition is unrolled, so automaton
    /// size grows linearly with it.
    pub max_repetition: u32,
    /// Most automaton states in a compiled grammar, over all rules. Default 500,000.
    /// Cost: about 40 bytes each, plus their edges; compile time is linear in it (removing
    /// the empty moves may visit 16 states of closures per state it allows, then stops
    /// with this limit named).
    pub max_states: usize,
    /// Deepest rule nesting the matcher follows (stack depth). Default 2,000. Cost: deeper
    /// stacks are longer pointer chains; paths deeper than this are dropped and the matcher
    /// records [`Matcher::depth_limit_hit`](crate::Matcher::depth_limit_hit).
    pub max_stack_depth: u32,
    /// Most alternative parse stacks alive at once (ambiguity). Default 10,000. Cost: each
    /// input byte is work proportional to it; beyond it the input is rejected with this
    /// limit named.
    pub max_live_stacks: usize,
    /// Most matcher states cached with their byte transitions (1 KiB each) and token masks
    /// (vocabulary/8 bytes each). Default 4,096. Cost: memory; when full the caches are
    /// flushed and rebuilt on demand.
    pub max_cached_states: usize,
    /// Largest rule (in automaton states) copied into its callers instead of being called.
    /// Default 64. Cost: inlining grows the automaton but lets masks be computed without
    /// leaving the caller's frame, which is what makes masks fast.
    pub max_inline_states: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_repetition: 2000,
            max_states: 500_000,
            max_stack_depth: 2_000,
            max_live_stacks: 10_000,
            max_cached_states: 4_096,
            max_inline_states: 64,
        }
    }
}
