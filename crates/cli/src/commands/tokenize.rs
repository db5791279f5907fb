//! `stampo tokenize` and `stampo detokenize`: the model's tokenizer from the command line,
//! with llama.cpp's defaults (BOS added when the model asks for it).

use std::path::PathBuf;

use stampo_tokenizer::DecodeOptions;

#[derive(clap::Args)]
pub struct Args {
    /// The model file.
    #[arg(short, long)]
    model: PathBuf,
    /// The text (or use --file).
    #[arg(required_unless_present = "file", conflicts_with = "file")]
    text: Option<String>,
    /// Read the text from a file.
    #[arg(short, long)]
    file: Option<PathBuf>,
    /// Turn the text of special tokens (`<|im_start|>`) into those tokens.
    #[arg(long)]
    special: bool,
    /// Do not add BOS/EOS even where the model asks for them.
    #[arg(long)]
    no_add_special: bool,
    /// Print the ids as a JSON array (the default).
    #[arg(long)]
    ids: bool,
    /// Print one `id<TAB>piece` line per token instead.
    #[arg(long, conflicts_with = "ids")]
    pieces: bool,
}

pub fn run(args: &Args) -> Result<(), String> {
    let text = match (&args.text, &args.file) {
        (Some(t), _) => t.clone(),
        (None, Some(f)) => {
            std::fs::read_to_string(f).map_err(|e| format!("{}: {e}", f.display()))?
        }
        (None, None) => return Err("give TEXT or --file".into()),
    };
    super::model_file::with_tokenizer(&args.model, |_, tok| {
        let ids = tok.encode(&text, !args.no_add_special, args.special);
        if args.pieces {
            for id in ids {
                let piece = String::from_utf8_lossy(tok.token_to_piece(id, true)).into_owned();
                println!("{id}\t{piece:?}");
            }
        } else {
            println!(
                "{}",
                serde_json::to_string(&ids).map_err(|e| e.to_string())?
            );
        }
        Ok(())
    })
}

#[derive(clap::Args)]
pub struct DetokenizeArgs {
    /// The model file.
    #[arg(short, long)]
    model: PathBuf,
    /// The token ids as a JSON array, e.g. `[9707, 1879]`.
    ids: String,
    /// Render control tokens as their text.
    #[arg(long)]
    special: bool,
    /// Drop a leading BOS and trailing EOS the model adds.
    #[arg(long)]
    remove_special: bool,
}

pub fn run_detokenize(args: &DetokenizeArgs) -> Result<(), String> {
    let ids: Vec<u32> = serde_json::from_str(&args.ids).map_err(|e| format!("IDS_JSON: {e}"))?;
    super::model_file::with_tokenizer(&args.model, |_, tok| {
        if let Some(&bad) = ids.iter().find(|&&id| id as usize >= tok.n_vocab()) {
            return Err(format!(
                "token id {bad} is outside the vocabulary ({} tokens)",
                tok.n_vocab()
            ));
        }
        let opts = DecodeOptions {
            remove_special: args.remove_special,
            unparse_special: args.special,
        };
        println!("{}", tok.decode(&ids, opts));
        Ok(())
    })
}
