//! JSON Schema (drafts 4 to 2020-12) compiled to the grammar IR.
//!
//! 1. Parse the schema ([`compile_str`]) or hand over a parsed value ([`compile`]).
//! 2. Read the [`Compiled::report`]: every keyword at its JSON pointer, enforced, narrowed,
//!    ignored with a warning, or an annotation. With [`Options::strict`] a warning is an
//!    error instead.
//! 3. Give [`Compiled::grammar`] to the matcher, or print it as GBNF.
//!
//! # What the grammar accepts
//! - **Property order** is the schema's declared order (`properties`, then the properties
//!   of `$ref`/`allOf` members in the order they are reached); additional properties come
//!   after the declared ones. Each property may appear once.
//! - **`additionalProperties` default**: as the specification says, absent means any
//!   additional property is allowed ([`AdditionalProperties::Allow`]);
//!   [`AdditionalProperties::Forbid`] generates only declared properties, as XGrammar does
//!   by default.
//! - **Whitespace** is bounded ([`Whitespace`]): by default llama.cpp's `space` rule between
//!   tokens (nothing, one space, or one or two newlines and up to 20 spaces or tabs), none
//!   before the first token or after the last.
//! - **Numbers** with bounds are written without an exponent; integers without a fraction.
//! - **Strings** write `"`, `\` and control characters as JSON escapes; other characters may
//!   also be escaped where no pattern, format or property name constrains them.
//!
//! # Structure
//! `flatten` gathers the schema objects that apply together (following `$ref` and
//! `allOf`) into a conjunction; each distinct conjunction becomes one rule, so recursion
//! through `$ref` becomes recursion between rules. `lower` picks `anyOf`/`oneOf` branches
//! apart and dispatches on type to the modules `object`, `array`, `string`, `number` (with
//! `multiple` for `multipleOf`) and `literal`; `prune` removes what can never match and
//! finds recursion with no base case.

mod array;
mod constraints;
mod error;
mod flatten;
mod format;
mod keywords;
mod literal;
mod lower;
mod multiple;
mod number;
mod object;
mod prune;
pub(crate) mod rules;
mod string;
mod whitespace;

pub use error::SchemaError;
pub use whitespace::Whitespace;

use serde_json::Value;

use crate::ir::Grammar;
use crate::report::Report;

/// What to do with object properties a schema does not declare and says nothing about.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AdditionalProperties {
    /// As the specification says: any additional property, with any value.
    #[default]
    Allow,
    /// Only declared properties (what XGrammar and OpenAI's strict mode do).
    Forbid,
}

/// Budgets that keep compilation bounded, each a [`SchemaError::LimitExceeded`] when hit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchemaLimits {
    /// Most rules in the output grammar. Default 20,000. Cost: each distinct conjunction of
    /// schemas (an `anyOf` branch merged with its siblings) is a rule; nested `anyOf`s
    /// multiply.
    pub max_rules: usize,
    /// Largest repetition bound (`maxLength`, `maxItems`, regex `{n}`). Default 2,000,
    /// llama.cpp's threshold. Cost: bounded repetitions are unrolled by the matcher.
    pub max_repetition: u32,
    /// Most values enumerated for `multipleOf` with bounds. Default 1,000.
    pub max_enumerated: u32,
    /// Most digits in a numeric bound (`minimum: 1e300` has 301). Default 400.
    pub max_digits: usize,
    /// Deepest nesting of subschemas being lowered at once (a property of an item of a
    /// property…). Default 200. Cost: native stack (and wasm's smaller one).
    pub max_depth: usize,
}

impl Default for SchemaLimits {
    fn default() -> Self {
        Self {
            max_rules: 20_000,
            max_repetition: 2_000,
            max_enumerated: 1_000,
            max_digits: 400,
            max_depth: 200,
        }
    }
}

/// How to compile.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// Refuse (return an error) instead of warning about a keyword the grammar cannot enforce.
    pub strict: bool,
    pub whitespace: Whitespace,
    pub additional_properties: AdditionalProperties,
    pub limits: SchemaLimits,
}

/// A compiled schema: the grammar and what was done with each keyword.
#[derive(Clone, Debug)]
pub struct Compiled {
    pub grammar: Grammar,
    pub report: Report,
}

/// Parses `text` as JSON and compiles it.
pub fn compile_str(text: &str, options: &Options) -> Result<Compiled, SchemaError> {
    let value: Value = serde_json::from_str(text).map_err(|e| SchemaError::NotJson {
        line: e.line(),
        column: e.column(),
        message: e.to_string(),
    })?;
    compile(&value, options)
}

/// Compiles a parsed schema. Property order follows the value's map order, so parse with
/// `serde_json`'s `preserve_order` (this crate enables it).
pub fn compile(schema: &Value, options: &Options) -> Result<Compiled, SchemaError> {
    lower::Compiler::new(schema, options)?.run()
}
