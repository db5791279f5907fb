//! Prints the ids of a text: `cargo run -p stampo-tokenizer --example tok MODEL.gguf TEXT`.
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let bytes = std::fs::read(&args[1]).expect("read");
    let g = stampo_gguf::Gguf::parse(&bytes).expect("parse");
    let t = stampo_tokenizer::Tokenizer::from_gguf(&g).expect("tokenizer");
    let ids = t.encode(&args[2], true, true);
    println!("{ids:?}");
    println!("{:?}", t.decode(&ids, Default::default()));
}
