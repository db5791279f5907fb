//! llama.cpp's GBNF: parsing it into the IR and printing the IR back as GBNF.

mod parser;
mod print;

pub use parser::{parse, parse_with_limits};
