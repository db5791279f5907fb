//! stampo's grammar engine: grammars compiled to byte-level matchers and token masks.
//!
//! Key types: [`Grammar`] (the one IR all front ends lower into), [`CompiledGrammar`] (its
//! automaton, shared between matchers), [`Matcher`] (feeds bytes, rolls back), [`Limits`]
//! (every budget) and [`GrammarError`].
//!
//! Usage:
//! 1. Build a [`Grammar`]: [`gbnf::parse`] for llama.cpp GBNF (or a JSON Schema / regex
//!    front end).
//! 2. Compile it once: `Arc::new(CompiledGrammar::new(&grammar)?)`.
//! 3. Per generation, a `Matcher::new(compiled.clone())`: `consume_bytes`, `is_accepting`,
//!    `rollback(n)`, `forced_bytes`, `closing_bytes`.
//! 4. For token masks, build a [`Vocabulary`] once (token bytes, special ids, eos ids) and use
//!    `Matcher::with_vocabulary`: `compute_mask(&mut words)`, `is_token_allowed(id)` (check
//!    the sampled token first), `commit_token(id)`, `rollback(n)`, `can_end`.
//!
//! ```
//! use std::sync::Arc;
//! use stampo_grammar::{gbnf, CompiledGrammar, Matcher};
//! let g = gbnf::parse(r#"root ::= "a" [0-9]+"#).unwrap();
//! let mut m = Matcher::new(Arc::new(CompiledGrammar::new(&g).unwrap()));
//! m.consume_bytes(b"a12").unwrap();
//! assert!(m.is_accepting());
//! ```
pub mod automaton;
pub mod bench;
pub mod error;
pub mod gbnf;
pub mod ir;
pub mod json_schema;
mod json_string;
pub mod limits;
pub mod matcher;
pub mod regex;
pub mod report;
mod stacks;
mod tokens;
pub mod vocab;

pub use automaton::CompiledGrammar;
pub use error::{GrammarError, Location};
pub use ir::{CharRange, Expr, Grammar, Rule, RuleId, TokenRef};
pub use limits::Limits;
pub use matcher::{Matcher, accepts};
pub use vocab::Vocabulary;
