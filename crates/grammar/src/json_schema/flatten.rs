//! Conjunctions: the schema objects that apply to one instance together.
//!
//! A schema object's own keywords, the members of its `allOf` and the target of its `$ref`
//! all apply at once; [`Resolver::flatten`] gathers them into a [`Conj`]. `anyOf`/`oneOf`
//! are kept as *groups* to pick a branch from later. Cycles (`$ref` back to an ancestor)
//! stop the gathering, since a schema already in the conjunction adds nothing new.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde_json::Value;

use super::SchemaError;

/// Schema objects that apply together, identified by JSON pointer.
#[derive(Clone, Debug, Default)]
pub struct Conj {
    /// Schema objects whose own keywords apply, in the order they were reached.
    pub own: Vec<String>,
    /// `anyOf`/`oneOf` arrays (their pointers) still to pick a branch from.
    pub groups: BTreeSet<String>,
    /// The pointer of a `false` schema in the conjunction: nothing matches.
    pub never: Option<String>,
}

/// A conjunction's identity, independent of the order it was gathered in.
pub type ConjKey = (BTreeSet<String>, BTreeSet<String>, bool);

impl Conj {
    pub fn key(&self) -> ConjKey {
        (
            self.own.iter().cloned().collect(),
            self.groups.clone(),
            self.never.is_some(),
        )
    }

    /// A readable name for the rule of this conjunction: its first schema's pointer.
    pub fn name_hint(&self) -> String {
        self.own.first().cloned().unwrap_or_else(|| "any".into())
    }
}

/// Finds `$ref` targets: JSON pointers, `$anchor`s and `$id`s inside the document,
/// resolving references against the base URI of the schema they appear in.
pub struct Resolver<'a> {
    pub root: &'a Value,
    /// Absolute URIs (with `#anchor` for anchors) of identified schemas.
    ids: HashMap<String, String>,
    /// The base URI each `$id` sets, by pointer of its schema.
    bases: HashMap<String, String>,
    /// `$ref`s read from the document's root because the resource they are written in lacks
    /// their pointer (see [`Resolver::resolve`]): why, by the pointer of the schema holding
    /// each, for the report.
    from_root: RefCell<BTreeMap<String, String>>,
}

impl<'a> Resolver<'a> {
    pub fn new(root: &'a Value) -> Self {
        let mut r = Self {
            root,
            ids: HashMap::new(),
            bases: HashMap::new(),
            from_root: RefCell::default(),
        };
        collect_ids(root, String::new(), String::new(), &mut r, 0);
        r
    }

    pub fn get(&self, pointer: &str) -> Option<&'a Value> {
        self.root.pointer(pointer)
    }

    /// The base URI in force at `pointer`: the nearest enclosing `$id`.
    fn base_of(&self, pointer: &str) -> &str {
        let mut p = pointer;
        loop {
            if let Some(b) = self.bases.get(p) {
                return b;
            }
            match p.rfind('/') {
                Some(i) => p = &p[..i],
                None => return "",
            }
        }
    }

    /// The pointer a `$ref` found at `at` points to.
    pub fn resolve(&self, at: &str, reference: &str) -> Result<String, SchemaError> {
        let not_found = || SchemaError::RefNotFound {
            pointer: at.to_owned(),
            target: reference.to_owned(),
        };
        let uri = join(self.base_of(at), reference);
        let (doc, fragment) = uri.split_once('#').unwrap_or((&uri, ""));
        let doc_ptr = if doc.is_empty() || doc == self.base_of("") {
            Some(String::new())
        } else {
            self.ids.get(doc).cloned()
        };
        // Fall back to matching the last path segment of an `$id` (`item.json`), which
        // schemas written without base URIs in mind rely on.
        let doc_ptr = doc_ptr
            .or_else(|| {
                doc.rsplit('/')
                    .next()
                    .and_then(|last| self.ids.get(&format!("~last:{last}")).cloned())
            })
            .ok_or_else(not_found)?;
        let target = if fragment.is_empty() || fragment.starts_with('/') {
            format!("{doc_ptr}{}", percent_decode(fragment))
        } else {
            self.ids
                .get(&format!("{doc}#{fragment}"))
                .cloned()
                .ok_or_else(not_found)?
        };
        let is_schema =
            |ptr: &str| matches!(self.get(ptr), Some(Value::Object(_) | Value::Bool(_)));
        if is_schema(&target) {
            return Ok(target);
        }
        // A pointer into a subschema that has an `$id` is, by the specification, a pointer
        // into that subschema. Many published schemas give subschemas an `$id` and still
        // write `#/definitions/…` for the document's own definitions, as editors (VS Code's
        // JSON service) read them: where the subschema lacks the pointer and the document has
        // it, the document's is taken, and the report says so (a warning: `strict` refuses).
        let at_root = percent_decode(fragment);
        if !doc_ptr.is_empty() && fragment.starts_with('/') && is_schema(&at_root) {
            self.from_root.borrow_mut().insert(
                at.to_owned(),
                format!(
                    "'{reference}' is not in the schema resource it is written in ('{doc}'); \
                     read from the document's root"
                ),
            );
            return Ok(at_root);
        }
        Err(not_found())
    }

    /// The `$ref`s read from the document's root so far (see [`Resolver::resolve`]): the
    /// pointer of the schema holding each, and why.
    pub fn read_from_root(&self) -> Vec<(String, String)> {
        self.from_root.borrow().clone().into_iter().collect()
    }

    /// Adds the schema at `pointer`, with its `allOf` members and `$ref` target, to `conj`.
    pub fn flatten(&self, pointer: &str, conj: &mut Conj) -> Result<(), SchemaError> {
        let mut stack = vec![pointer.to_owned()];
        while let Some(ptr) = stack.pop() {
            match self.get(&ptr) {
                Some(Value::Bool(true)) => {}
                Some(Value::Bool(false)) => {
                    conj.never.get_or_insert(ptr);
                }
                Some(Value::Object(map)) => {
                    if conj.own.contains(&ptr) {
                        continue;
                    }
                    conj.own.push(ptr.clone());
                    // Pushed in reverse so they are reached in document order.
                    let mut next = Vec::new();
                    if let Some(r) = map.get("$ref") {
                        let r = r.as_str().ok_or_else(|| SchemaError::NotASchema {
                            pointer: ptr.clone(),
                            message: "$ref must be a string".into(),
                        })?;
                        next.push(self.resolve(&ptr, r)?);
                    }
                    // `not: {not: X}` is X.
                    if let Some(Value::Object(n)) = map.get("not")
                        && let Some(inner) = n.get("not")
                    {
                        let only_not = n.keys().all(|k| {
                            k == "not"
                                || matches!(
                                    super::keywords::kind(k),
                                    super::keywords::Kind::Annotation
                                )
                        });
                        if only_not && matches!(inner, Value::Object(_) | Value::Bool(_)) {
                            next.push(format!("{ptr}/not/not"));
                        }
                    }
                    if let Some(all) = map.get("allOf") {
                        let all = all.as_array().ok_or_else(|| SchemaError::NotASchema {
                            pointer: format!("{ptr}/allOf"),
                            message: "allOf must be an array of schemas".into(),
                        })?;
                        next.extend((0..all.len()).map(|i| format!("{ptr}/allOf/{i}")));
                    }
                    for kw in ["anyOf", "oneOf"] {
                        if let Some(v) = map.get(kw) {
                            match v.as_array() {
                                Some(a) if !a.is_empty() => {
                                    conj.groups.insert(format!("{ptr}/{kw}"));
                                }
                                _ => {
                                    return Err(SchemaError::NotASchema {
                                        pointer: format!("{ptr}/{kw}"),
                                        message: format!(
                                            "{kw} must be a non-empty array of schemas"
                                        ),
                                    });
                                }
                            }
                        }
                    }
                    stack.extend(next.into_iter().rev());
                }
                Some(other) => {
                    return Err(SchemaError::NotASchema {
                        pointer: ptr,
                        message: format!(
                            "a schema is an object or a boolean, not {}",
                            kind_of(other)
                        ),
                    });
                }
                None => {
                    return Err(SchemaError::RefNotFound {
                        pointer: ptr.clone(),
                        target: format!("#{ptr}"),
                    });
                }
            }
        }
        Ok(())
    }
}

pub fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Escapes a property name for use in a JSON pointer (RFC 6901).
pub fn escape(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}

/// Records `$id`s (by absolute URI, and by last path segment as a fallback) and anchors
/// (`$anchor`, draft-6 `"$id": "#name"`) under the base URI in force.
fn collect_ids(v: &Value, ptr: String, base: String, r: &mut Resolver, depth: usize) {
    // Deep documents are walked only so far; refs into deeper ids then fail with a clear
    // error instead of overflowing the stack.
    if depth > 256 {
        return;
    }
    match v {
        Value::Object(map) => {
            let mut base = base;
            for key in ["$id", "id"] {
                let Some(Value::String(id)) = map.get(key) else {
                    continue;
                };
                match id.split_once('#') {
                    Some(("", name)) if !name.is_empty() => {
                        r.ids
                            .entry(format!("{base}#{name}"))
                            .or_insert_with(|| ptr.clone());
                    }
                    _ => {
                        let doc = id.split('#').next().unwrap_or_default();
                        base = join(&base, doc);
                        r.ids.entry(base.clone()).or_insert_with(|| ptr.clone());
                        if let Some(last) = base.rsplit('/').next() {
                            r.ids
                                .entry(format!("~last:{last}"))
                                .or_insert_with(|| ptr.clone());
                        }
                        r.bases.insert(ptr.clone(), base.clone());
                    }
                }
                break;
            }
            if let Some(Value::String(a)) = map.get("$anchor") {
                r.ids
                    .entry(format!("{base}#{a}"))
                    .or_insert_with(|| ptr.clone());
            }
            for (k, child) in map {
                // Values of `enum`/`const`/`examples` are data, not schemas.
                if matches!(k.as_str(), "enum" | "const" | "examples" | "default") {
                    continue;
                }
                collect_ids(
                    child,
                    format!("{ptr}/{}", escape(k)),
                    base.clone(),
                    r,
                    depth + 1,
                );
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                collect_ids(child, format!("{ptr}/{i}"), base.clone(), r, depth + 1);
            }
        }
        _ => {}
    }
}

/// Resolves a URI reference against a base (RFC 3986 section 5, without dot segments).
fn join(base: &str, reference: &str) -> String {
    let has_scheme = |s: &str| {
        s.split_once(':').is_some_and(|(scheme, _)| {
            !scheme.is_empty()
                && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c))
        })
    };
    if base.is_empty() || has_scheme(reference) {
        return reference.to_owned();
    }
    let base_doc = base.split('#').next().unwrap_or_default();
    if reference.is_empty() {
        return base_doc.to_owned();
    }
    if reference.starts_with('#') {
        return format!("{base_doc}{reference}");
    }
    let scheme_end = base_doc.find(':').map_or(0, |i| i + 1);
    if reference.starts_with("//") {
        return format!("{}{reference}", &base_doc[..scheme_end]);
    }
    if reference.starts_with('/') {
        let after = &base_doc[scheme_end..];
        let authority_end = if let Some(rest) = after.strip_prefix("//") {
            scheme_end + 2 + rest.find('/').unwrap_or(rest.len())
        } else {
            scheme_end
        };
        return format!("{}{reference}", &base_doc[..authority_end]);
    }
    match base_doc.rfind('/') {
        Some(i) if i >= scheme_end => format!("{}{reference}", &base_doc[..=i]),
        _ => format!("{}{reference}", &base_doc[..scheme_end]),
    }
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Ok(b) = u8::from_str_radix(&s[i + 1..i + 3], 16)
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
