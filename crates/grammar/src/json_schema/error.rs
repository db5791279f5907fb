//! Errors of the JSON Schema compiler, each carrying the JSON pointer of the schema object
//! at fault (printed as a URI fragment, `#/properties/a`).

use thiserror::Error;

use crate::regex::RegexError;

/// Why a schema could not be compiled.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum SchemaError {
    #[error("the schema is not JSON (line {line}, column {column}): {message}")]
    NotJson {
        line: usize,
        column: usize,
        message: String,
    },

    #[error("#{pointer}: not a schema: {message}")]
    NotASchema { pointer: String, message: String },

    #[error("#{pointer}: keyword '{keyword}' refused: {reason}")]
    Refused {
        pointer: String,
        keyword: String,
        reason: String,
    },

    #[error("#{pointer}: $ref '{target}' does not point to a schema in this document")]
    RefNotFound { pointer: String, target: String },

    #[error("#{pointer}: the schema accepts no instance ({reason})")]
    Unsatisfiable { pointer: String, reason: String },

    #[error("#{pointer}: {what} is {value}, over the limit {max}")]
    LimitExceeded {
        pointer: String,
        what: &'static str,
        value: u64,
        max: u64,
    },

    #[error("#{pointer}: pattern refused: {source}")]
    Regex { pointer: String, source: RegexError },
}
