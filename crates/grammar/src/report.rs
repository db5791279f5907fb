//! The keyword report: what the JSON Schema compiler did with every keyword.
//!
//! Compiling a schema is never silent. Each keyword it meets is recorded at its JSON
//! pointer with a [`Status`]: *enforced* by the grammar, an *annotation* accepted quietly
//! (title, description, …), *ignored with a warning* (the grammar accepts more than the
//! schema does), or *refused* (compilation failed because of it). With
//! [`Options::strict`](crate::json_schema::Options::strict) every warning becomes a refusal.

use std::collections::BTreeMap;
use std::fmt;

/// What the compiler did with one keyword.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    /// The grammar enforces it exactly: no valid instance is rejected because of it and no
    /// invalid instance is accepted.
    Enforced,
    /// The grammar enforces it but may reject some valid instances (a safe
    /// under-approximation, e.g. numbers written with an exponent beside `minimum`).
    Narrowed(String),
    /// Metadata with no effect on validation (`title`, `description`, `examples`, …).
    Annotation,
    /// Not enforced: the grammar may accept instances this keyword forbids.
    Warning(String),
    /// Compilation failed because of it.
    Refused(String),
    /// In a subschema no instance reaches (an unused definition, a branch pruned before
    /// it was read): it has no effect on the grammar. Not printed.
    Unreached,
}

impl Status {
    /// Severity for merging two statuses of one keyword: the worse one wins.
    fn rank(&self) -> u8 {
        match self {
            Status::Unreached => 0,
            Status::Annotation => 0,
            Status::Enforced => 1,
            Status::Narrowed(_) => 2,
            Status::Warning(_) => 3,
            Status::Refused(_) => 4,
        }
    }
}

/// One keyword at one place in the schema.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// JSON pointer of the schema object holding the keyword (`""` is the root).
    pub pointer: String,
    pub keyword: String,
    pub status: Status,
}

/// Every keyword the compiler met, by pointer and keyword.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    entries: BTreeMap<(String, String), Status>,
}

impl Report {
    /// Records a keyword's status; if it was already recorded (a schema reached twice), the
    /// worse status is kept.
    pub fn record(&mut self, pointer: &str, keyword: &str, status: Status) {
        let key = (pointer.to_owned(), keyword.to_owned());
        match self.entries.get(&key) {
            Some(old) if old.rank() >= status.rank() => {}
            _ => {
                self.entries.insert(key, status);
            }
        }
    }

    /// Records a keyword only if it was not recorded yet.
    pub fn record_if_absent(&mut self, pointer: &str, keyword: &str, status: Status) {
        self.entries
            .entry((pointer.to_owned(), keyword.to_owned()))
            .or_insert(status);
    }

    /// All entries, ordered by pointer then keyword.
    pub fn entries(&self) -> impl Iterator<Item = Entry> + '_ {
        self.entries
            .iter()
            .map(|((pointer, keyword), status)| Entry {
                pointer: pointer.clone(),
                keyword: keyword.clone(),
                status: status.clone(),
            })
    }

    /// The entries that are warnings (the grammar may accept invalid instances).
    pub fn warnings(&self) -> impl Iterator<Item = Entry> + '_ {
        self.entries()
            .filter(|e| matches!(e.status, Status::Warning(_)))
    }

    /// True when no keyword was left unenforced: every instance the grammar accepts is valid.
    pub fn is_sound(&self) -> bool {
        self.warnings().next().is_none()
    }

    /// True when, in addition, no keyword was narrowed: the grammar accepts exactly the
    /// schema's valid instances (in the serialisation the compiler documents).
    pub fn is_exact(&self) -> bool {
        self.is_sound()
            && !self
                .entries
                .values()
                .any(|s| matches!(s, Status::Narrowed(_)))
    }
}

impl fmt::Display for Report {
    /// One line per keyword that is not an annotation: `status pointer keyword: reason`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for e in self.entries() {
            let ptr = if e.pointer.is_empty() {
                "#"
            } else {
                &e.pointer
            };
            match &e.status {
                Status::Annotation | Status::Unreached => {}
                Status::Enforced => writeln!(f, "enforced  {ptr} {}", e.keyword)?,
                Status::Narrowed(why) => writeln!(f, "narrowed  {ptr} {}: {why}", e.keyword)?,
                Status::Warning(why) => writeln!(f, "warning   {ptr} {}: {why}", e.keyword)?,
                Status::Refused(why) => writeln!(f, "refused   {ptr} {}: {why}", e.keyword)?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_worse_status_of_a_keyword_wins() {
        let mut r = Report::default();
        r.record("/a", "pattern", Status::Enforced);
        r.record("/a", "pattern", Status::Warning("x".into()));
        r.record("/a", "pattern", Status::Enforced);
        assert_eq!(r.warnings().count(), 1);
        assert!(!r.is_sound());
    }

    #[test]
    fn annotations_are_not_printed() {
        let mut r = Report::default();
        r.record("", "title", Status::Annotation);
        r.record("", "type", Status::Enforced);
        assert_eq!(r.to_string(), "enforced  # type\n");
        assert!(r.is_exact());
    }
}
