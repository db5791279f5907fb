//! `stampo`: the native command line.
//!
//! Each subcommand lives in `commands/<name>.rs`; this file holds the [`Command`] enum and
//! the dispatch.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod commands;

#[derive(Parser)]
#[command(
    name = "stampo",
    version,
    about = "Structured output for small LLMs: grammars, schemas, models"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Compile a JSON Schema to GBNF and print the keyword report, or check a GBNF file.
    Grammar(commands::grammar::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Grammar(args) => commands::grammar::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}
