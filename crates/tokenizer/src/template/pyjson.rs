//! `tojson` as transformers defines it: Python's `json.dumps(x, ensure_ascii=False,
//! indent=indent, separators=separators, sort_keys=sort_keys)`, byte for byte (separators
//! `", "` and `": "`, Python's float repr, no HTML escaping).

use minijinja::value::{Value, ValueKind};

pub(crate) struct Style {
    pub indent: Option<String>,
    pub item_sep: String,
    pub key_sep: String,
    pub sort_keys: bool,
}

impl Style {
    pub fn new(
        indent: Option<String>,
        separators: Option<(String, String)>,
        sort_keys: bool,
    ) -> Self {
        let (item_sep, key_sep) = separators.unwrap_or_else(|| {
            // Python: with an indent, the item separator loses its trailing space.
            (
                if indent.is_some() { "," } else { ", " }.to_string(),
                ": ".to_string(),
            )
        });
        Style {
            indent,
            item_sep,
            key_sep,
            sort_keys,
        }
    }
}

pub(crate) fn dumps(v: &Value, style: &Style) -> Result<String, minijinja::Error> {
    let mut out = String::new();
    write_value(&mut out, v, style, 0)?;
    Ok(out)
}

fn newline(out: &mut String, style: &Style, level: usize) {
    if let Some(ind) = &style.indent {
        out.push('\n');
        for _ in 0..level {
            out.push_str(ind);
        }
    }
}

fn write_value(
    out: &mut String,
    v: &Value,
    style: &Style,
    level: usize,
) -> Result<(), minijinja::Error> {
    match v.kind() {
        ValueKind::Undefined | ValueKind::None => out.push_str("null"),
        ValueKind::Bool => out.push_str(if v.is_true() { "true" } else { "false" }),
        ValueKind::Number => {
            if !v.is_integer() {
                let f = f64::try_from(v.clone()).unwrap_or(f64::NAN);
                out.push_str(&float_repr(f));
            } else if let Ok(i) = i64::try_from(v.clone()) {
                out.push_str(&i.to_string());
            } else if let Ok(u) = u64::try_from(v.clone()) {
                out.push_str(&u.to_string());
            } else if let Ok(f) = f64::try_from(v.clone()) {
                out.push_str(&float_repr(f));
            } else {
                out.push_str(&v.to_string());
            }
        }
        ValueKind::String => write_str(out, v.as_str().unwrap_or_default()),
        ValueKind::Bytes => write_str(
            out,
            &String::from_utf8_lossy(v.as_bytes().unwrap_or_default()),
        ),
        ValueKind::Seq | ValueKind::Iterable => {
            let items: Vec<Value> = v.try_iter()?.collect();
            if items.is_empty() {
                out.push_str("[]");
                return Ok(());
            }
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(&style.item_sep);
                }
                newline(out, style, level + 1);
                write_value(out, item, style, level + 1)?;
            }
            newline(out, style, level);
            out.push(']');
        }
        ValueKind::Map => {
            let mut keys: Vec<Value> = v.try_iter()?.collect();
            if style.sort_keys {
                keys.sort_by_key(|a| a.to_string());
            }
            if keys.is_empty() {
                out.push_str("{}");
                return Ok(());
            }
            out.push('{');
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push_str(&style.item_sep);
                }
                newline(out, style, level + 1);
                match k.as_str() {
                    Some(s) => write_str(out, s),
                    None => write_str(out, &k.to_string()),
                }
                out.push_str(&style.key_sep);
                write_value(out, &v.get_item(k)?, style, level + 1)?;
            }
            newline(out, style, level);
            out.push('}');
        }
        _ => write_str(out, &v.to_string()),
    }
    Ok(())
}

fn write_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Python's `repr(float)`: the shortest digits that round-trip, positional for exponents
/// -4..16, scientific (`1e+16`, `1.5e-05`) otherwise; `NaN` and `Infinity` as `json`.
pub(crate) fn float_repr(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        };
    }
    if f == 0.0 {
        return if f.is_sign_negative() {
            "-0.0".into()
        } else {
            "0.0".into()
        };
    }
    // Rust's `{:e}` gives the shortest round-trip digits: "d.ddde-x".
    let sci = format!("{f:e}");
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let neg = mant.starts_with('-');
    let digits: String = mant.chars().filter(char::is_ascii_digit).collect();
    let sign = if neg { "-" } else { "" };
    if (-4..16).contains(&exp) {
        let n = digits.len() as i32;
        let s = if exp >= 0 {
            if exp + 1 >= n {
                format!("{digits}{}.0", "0".repeat((exp + 1 - n) as usize))
            } else {
                let (a, b) = digits.split_at((exp + 1) as usize);
                format!("{a}.{b}")
            }
        } else {
            format!("0.{}{digits}", "0".repeat((-exp - 1) as usize))
        };
        format!("{sign}{s}")
    } else {
        let (first, rest) = digits.split_at(1);
        let m = if rest.is_empty() {
            first.to_string()
        } else {
            format!("{first}.{rest}")
        };
        format!(
            "{sign}{m}e{}{:02}",
            if exp < 0 { '-' } else { '+' },
            exp.abs()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::float_repr;

    #[test]
    fn python_float_repr() {
        for (f, s) in [
            (1.0, "1.0"),
            (0.1, "0.1"),
            (1.5e-5, "1.5e-05"),
            (1e16, "1e+16"),
            (123456789012345.6, "123456789012345.6"),
            (-2.5, "-2.5"),
            (0.0001, "0.0001"),
            (1e-10, "1e-10"),
            (3.0e20, "3e+20"),
            (100.0, "100.0"),
        ] {
            assert_eq!(float_repr(f), s);
        }
    }
}
