//! `stampo`: the native command line.
//!
//! Each subcommand lives in `commands/<name>.rs`; this file holds the [`Command`] enum and
//! the dispatch.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod commands;

// Each decode step allocates and frees activation buffers of hundreds of kilobytes; glibc's
// malloc hands those back to the kernel and faults fresh zeroed pages in the next step, which
// cost SmolLM2 a fifth of its decode speed (32.6–36.3 → 41.4–42.1 tokens/s with mimalloc).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc returns freed memory to the kernel 10 ms after it is freed; a prefill's
/// activation buffers (megabytes each) are freed and allocated again every layer, and each
/// time the kernel zeroed fresh pages for them (a tenth of the calling thread's time in a
/// two-thread SmolLM2 prefill). A second's delay keeps them for the next layer (measured with
/// `MIMALLOC_PURGE_DELAY`, alternating): 128-token prefill on two threads 304–318 → 333–346
/// tokens/s; peak memory of a 512-token prefill 301 → 329–346 MB.
fn keep_freed_memory_a_while() {
    // mimalloc.h's `mi_option_purge_delay` (15 in its v2 and v3; libmimalloc-sys names no
    // constant for it), in milliseconds.
    const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
    // SAFETY: setting an option is not thread safe; this runs first in `main`, before any
    // other thread exists.
    unsafe { libmimalloc_sys::mi_option_set(PURGE_DELAY, 1000) };
}

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
    /// Benchmarks (`stampo bench grammar`).
    Bench(commands::bench::Args),
    /// Print a model file's metadata and tensor table (like llama.cpp's gguf-dump).
    Inspect(commands::inspect::Args),
    /// Tokenize text with a model's tokenizer; prints the ids as a JSON array.
    Tokenize(commands::tokenize::Args),
    /// Turn token ids (a JSON array) back into text.
    Detokenize(commands::tokenize::DetokenizeArgs),
    /// Render a conversation with the model's chat template.
    Template(commands::template::Args),
    /// Greedy decoding of a raw prompt (no chat template), like llama.cpp's `llama-simple`.
    Generate(commands::generate::Args),
    /// Perplexity of a text file, as llama.cpp's `llama-perplexity` computes it.
    Perplexity(commands::perplexity::Args),
    /// Generate with a constraint (--json, --json-schema, --grammar-file), streaming the text.
    Run(commands::request::RunArgs),
    /// Run a llama.cpp `/completion` or OpenAI chat body; print the server-shaped response.
    Request(commands::request::RequestArgs),
}

fn main() -> ExitCode {
    keep_freed_memory_a_while();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Grammar(args) => commands::grammar::run(&args),
        Command::Bench(args) => commands::bench::run(&args),
        Command::Inspect(args) => commands::inspect::run(&args),
        Command::Tokenize(args) => commands::tokenize::run(&args),
        Command::Detokenize(args) => commands::tokenize::run_detokenize(&args),
        Command::Template(args) => commands::template::run(&args),
        Command::Generate(args) => commands::generate::run(&args),
        Command::Perplexity(args) => commands::perplexity::run(&args),
        Command::Run(args) => commands::request::run(&args),
        Command::Request(args) => commands::request::run_request(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}
