//! One module per subcommand.

pub mod bench;
pub mod grammar;
pub mod inspect;
pub mod model_file;
pub mod template;
pub mod tokenize;
