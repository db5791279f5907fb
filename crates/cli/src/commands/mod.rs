//! One module per subcommand.

pub mod bench;
pub mod generate;
pub mod grammar;
pub mod inspect;
pub mod model_file;
pub mod perplexity;
pub mod request;
pub mod template;
pub mod tokenize;
