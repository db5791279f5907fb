//! `stampo grammar SCHEMA.json [--strict]`: the GBNF of a JSON Schema on stdout, the keyword
//! report on stderr. `stampo grammar --gbnf FILE`: parse and compile a GBNF grammar and say
//! whether it is usable, or where it is wrong.

use std::path::PathBuf;

use clap::ValueEnum;
use stampo_grammar::json_schema::{self, AdditionalProperties, Options, Whitespace};
use stampo_grammar::{CompiledGrammar, gbnf};

#[derive(clap::Args)]
pub struct Args {
    /// The JSON Schema file (or, with --gbnf, the GBNF file).
    file: PathBuf,
    /// Treat FILE as a GBNF grammar to check.
    #[arg(long)]
    gbnf: bool,
    /// Refuse keywords the grammar cannot enforce instead of warning about them.
    #[arg(long)]
    strict: bool,
    /// Whitespace allowed between JSON tokens.
    #[arg(long, value_enum, default_value_t = Ws::Flexible)]
    whitespace: Ws,
    /// Generate only declared properties when a schema says nothing about others.
    #[arg(long)]
    forbid_additional: bool,
}

#[derive(Clone, Copy, ValueEnum)]
enum Ws {
    /// llama.cpp's `space` rule between tokens.
    Flexible,
    /// No whitespace.
    Compact,
    /// Newlines and up to 40 spaces of indentation.
    Indented,
}

pub fn run(args: &Args) -> Result<(), String> {
    let text =
        std::fs::read_to_string(&args.file).map_err(|e| format!("{}: {e}", args.file.display()))?;
    let name = args.file.display();
    if args.gbnf {
        let grammar = gbnf::parse(&text).map_err(|e| format!("{name}: {e}"))?;
        let compiled = CompiledGrammar::new(&grammar).map_err(|e| format!("{name}: {e}"))?;
        println!(
            "{name}: ok, {} rules, {} automaton states",
            grammar.rules.len(),
            compiled.num_states()
        );
        return Ok(());
    }
    let options = Options {
        strict: args.strict,
        whitespace: match args.whitespace {
            Ws::Flexible => Whitespace::Flexible,
            Ws::Compact => Whitespace::Compact,
            Ws::Indented => Whitespace::Indented { max_indent: 40 },
        },
        additional_properties: if args.forbid_additional {
            AdditionalProperties::Forbid
        } else {
            AdditionalProperties::Allow
        },
        ..Options::default()
    };
    let compiled = json_schema::compile_str(&text, &options).map_err(|e| format!("{name}: {e}"))?;
    print!("{}", compiled.grammar);
    eprint!("{}", compiled.report);
    let warnings = compiled.report.warnings().count();
    eprintln!(
        "{name}: {} rules; {}",
        compiled.grammar.rules.len(),
        if warnings == 0 {
            "every keyword enforced".to_owned()
        } else {
            format!("{warnings} keyword(s) not enforced (see warnings; --strict refuses them)")
        }
    );
    Ok(())
}
