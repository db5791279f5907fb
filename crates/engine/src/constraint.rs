//! A request's [`Constraint`] compiled by the grammar crate, and the grammar crate's token
//! matcher seen as the loop's [`TokenConstraint`].
//!
//! A grammar or schema that does not compile is an error naming the field; it never falls
//! back to unconstrained output (the failure of llama.cpp's issue #19051).

use std::sync::Arc;

use serde_json::{Value, json};
use stampo_grammar::json_schema::{self, Options};
use stampo_grammar::report::Status;
use stampo_grammar::vocab::Vocabulary as GrammarVocabulary;
use stampo_grammar::{CompiledGrammar, GrammarError, Matcher, gbnf};

use crate::error::Error;
use crate::generate::{BoxError, TokenConstraint};
use crate::request::{Constraint, Warning};
use crate::tool_calls::tools_schema;

/// A compiled constraint, shareable between generations, with the schema compiler's
/// keyword warnings.
#[derive(Clone)]
pub struct CompiledConstraint {
    pub grammar: Arc<CompiledGrammar>,
    pub warnings: Vec<Warning>,
}

/// Compiles `constraint`; `Ok(None)` for [`Constraint::None`]. `strict` refuses schema
/// keywords the grammar cannot enforce instead of warning about them.
pub fn compile(constraint: &Constraint, strict: bool) -> Result<Option<CompiledConstraint>, Error> {
    let options = Options {
        strict,
        ..Options::default()
    };
    let (field, schema) = match constraint {
        Constraint::None => return Ok(None),
        Constraint::Gbnf(text) => {
            let grammar = gbnf::parse(text)
                .and_then(|g| CompiledGrammar::new(&g))
                .map_err(|source| Error::Grammar {
                    field: "grammar",
                    source,
                })?;
            return Ok(Some(CompiledConstraint {
                grammar: Arc::new(grammar),
                warnings: Vec::new(),
            }));
        }
        Constraint::JsonSchema(schema) => ("json_schema", schema.clone()),
        // llama.cpp compiles `json_object` as the empty schema: any JSON value.
        Constraint::AnyJson => ("response_format", json!({})),
        Constraint::Tools(tools) => ("tools", tools_schema(tools)),
    };
    schema_constraint(field, &schema, &options)
}

fn schema_constraint(
    field: &'static str,
    schema: &Value,
    options: &Options,
) -> Result<Option<CompiledConstraint>, Error> {
    let compiled =
        json_schema::compile(schema, options).map_err(|source| Error::Schema { field, source })?;
    let warnings = compiled
        .report
        .warnings()
        .map(|e| {
            let why = match e.status {
                Status::Warning(why) => why,
                _ => String::new(),
            };
            Warning::new(
                format!("{field}#{}", e.pointer),
                format!("keyword `{}` is not enforced: {why}", e.keyword),
            )
        })
        .collect();
    let grammar = CompiledGrammar::new(&compiled.grammar)
        .map_err(|source| Error::Grammar { field, source })?;
    Ok(Some(CompiledConstraint {
        grammar: Arc::new(grammar),
        warnings,
    }))
}

/// The grammar crate's matcher as the loop's [`TokenConstraint`].
pub struct GrammarConstraint {
    matcher: Matcher,
    scratch: Vec<u32>,
}

impl GrammarConstraint {
    /// A fresh matcher for one generation. Fails if the grammar names a token the
    /// vocabulary lacks.
    pub fn new(
        compiled: &CompiledConstraint,
        vocab: Arc<GrammarVocabulary>,
    ) -> Result<Self, Error> {
        let words = vocab.mask_words();
        let matcher =
            Matcher::with_vocabulary(Arc::clone(&compiled.grammar), vocab).map_err(|source| {
                Error::Grammar {
                    field: "grammar",
                    source,
                }
            })?;
        Ok(Self {
            matcher,
            scratch: vec![0; words],
        })
    }

    pub fn matcher(&self) -> &Matcher {
        &self.matcher
    }
}

impl TokenConstraint for GrammarConstraint {
    fn fill_mask(&mut self, mask: &mut [u32]) -> Result<(), BoxError> {
        // The model's logits may be longer than the tokenizer's vocabulary (padding rows);
        // the grammar's mask covers the vocabulary only.
        self.matcher
            .compute_mask(&mut self.scratch)
            .map_err(boxed)?;
        let n = self.scratch.len().min(mask.len());
        mask[..n].copy_from_slice(&self.scratch[..n]);
        Ok(())
    }

    fn commit(&mut self, token: u32) -> Result<(), BoxError> {
        self.matcher.commit_token(token).map_err(boxed)
    }

    fn is_accepting(&self) -> bool {
        self.matcher.can_end()
    }

    fn closing_bytes(&mut self) -> Option<Vec<u8>> {
        self.matcher.closing_bytes()
    }

    fn closing_cost_after(&mut self, bytes: &[u8]) -> Option<usize> {
        self.matcher
            .min_bytes_to_close_after(bytes)
            .map(|n| n as usize)
    }

    fn forced_bytes(&mut self) -> Vec<u8> {
        self.matcher.forced_bytes()
    }

    fn allows(&mut self, token: u32) -> bool {
        self.matcher.is_token_allowed(token)
    }
}

fn boxed(e: GrammarError) -> BoxError {
    Box::new(e)
}
