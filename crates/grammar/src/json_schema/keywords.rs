//! Which keywords the compiler knows, and what kind each is.

/// How the compiler treats a keyword before looking at its value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Metadata, or structure the compiler reads through (`$defs`): accepted quietly.
    Annotation,
    /// Read by the flattening of conjunctions (`$ref`, `allOf`, `anyOf`, `oneOf`).
    Applicator,
    /// An assertion this compiler enforces (possibly only in some forms; the compiler
    /// records a warning for the others).
    Assertion,
    /// A keyword of the specification this compiler does not enforce.
    Unsupported,
    /// Not a JSON Schema keyword (a typo such as `minlength`, or a vendor extension).
    Unknown,
}

pub fn kind(keyword: &str) -> Kind {
    match keyword {
        "title" | "description" | "examples" | "default" | "$comment" | "$schema" | "$id"
        | "id" | "$anchor" | "$defs" | "definitions" | "deprecated" | "readOnly" | "writeOnly"
        | "contentMediaType" | "contentEncoding" | "contentSchema" | "$vocabulary"
        | "$dynamicAnchor" | "$recursiveAnchor" => Kind::Annotation,
        "$ref" | "allOf" | "anyOf" | "oneOf" => Kind::Applicator,
        "type"
        | "enum"
        | "const"
        | "minLength"
        | "maxLength"
        | "pattern"
        | "format"
        | "minimum"
        | "maximum"
        | "exclusiveMinimum"
        | "exclusiveMaximum"
        | "multipleOf"
        | "properties"
        | "required"
        | "additionalProperties"
        | "patternProperties"
        | "minProperties"
        | "maxProperties"
        | "propertyNames"
        | "dependentRequired"
        | "dependencies"
        | "items"
        | "prefixItems"
        | "additionalItems"
        | "minItems"
        | "maxItems"
        | "contains"
        | "minContains"
        | "maxContains"
        | "uniqueItems"
        | "not" => Kind::Assertion,
        "if"
        | "then"
        | "else"
        | "dependentSchemas"
        | "unevaluatedProperties"
        | "unevaluatedItems"
        | "$dynamicRef"
        | "$recursiveRef" => Kind::Unsupported,
        _ => Kind::Unknown,
    }
}
