//! One module per subcommand.

pub mod grammar;
