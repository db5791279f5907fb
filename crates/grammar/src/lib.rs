//! stampo's grammar engine.
pub mod ir;
