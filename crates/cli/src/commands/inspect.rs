//! `stampo inspect MODEL.gguf`: the header, every metadata pair and the tensor table, in
//! the layout of llama.cpp's `gguf-dump` (with each tensor's bytes), or as JSON.

use std::path::PathBuf;

use serde_json::{Value as Json, json};
use stampo_gguf::split::SplitGguf;
use stampo_gguf::{Gguf, Value, ValueType};

#[derive(clap::Args)]
pub struct Args {
    /// The model file (any part of a split model loads every part).
    model: PathBuf,
    /// Array elements to show per metadata array (gguf-dump shows 5).
    #[arg(long, default_value_t = 5)]
    array_items: usize,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

pub fn run(args: &Args) -> Result<(), String> {
    let parts = super::model_file::read_parts(&args.model)?;
    let parsed = parts
        .iter()
        .map(|(p, b)| Gguf::parse(b).map_err(|e| format!("{}: {e}", p.display())))
        .collect::<Result<Vec<_>, _>>()?;
    let model = SplitGguf::from_parts(parsed).map_err(|e| e.to_string())?;
    if args.json {
        let text = serde_json::to_string_pretty(&as_json(&model, args.array_items))
            .map_err(|e| e.to_string())?;
        println!("{text}");
        return Ok(());
    }
    for (i, ((path, bytes), g)) in parts.iter().zip(model.parts()).enumerate() {
        println!(
            "* File {}: {} ({} bytes), GGUF v{}, little-endian, alignment {}, data at byte {}",
            i + 1,
            path.display(),
            bytes.len(),
            g.version(),
            g.alignment(),
            g.data_offset()
        );
    }
    let first = &model.parts()[0];
    println!("* Dumping {} key/value pair(s)", first.metadata().len() + 3);
    println!(
        "      1: UINT32     |        1 | GGUF.version = {}",
        first.version()
    );
    println!(
        "      2: UINT64     |        1 | GGUF.tensor_count = {}",
        first.header().tensor_count
    );
    println!(
        "      3: UINT64     |        1 | GGUF.kv_count = {}",
        first.header().metadata_count
    );
    for (i, (key, v)) in first.metadata().iter().enumerate() {
        let (ty, n) = match v {
            Value::Array(a) => (format!("[{}]", type_name(a.elem_type())), a.len()),
            other => (type_name(other.value_type()).to_string(), 1),
        };
        println!(
            "{:7}: {:10} | {:8} | {key} = {}",
            i + 4,
            ty,
            n,
            show(v, args.array_items)
        );
    }
    println!("* Dumping {} tensor(s)", model.tensor_count());
    let mut total = 0u64;
    for (i, (_, t)) in model.tensors().enumerate() {
        let mut dims: Vec<String> = t.dims.iter().map(u64::to_string).collect();
        dims.resize(4, "1".into());
        println!(
            "{:7}: {:10} | {:>6}, {:>6}, {:>6}, {:>6} | {:7} | {:10} | {}",
            i + 1,
            t.elements(),
            dims[0],
            dims[1],
            dims[2],
            dims[3],
            t.ty.name(),
            t.size,
            t.name
        );
        total += t.size;
    }
    println!("* Tensor data: {total} bytes");
    Ok(())
}

fn type_name(t: ValueType) -> &'static str {
    match t {
        ValueType::U8 => "UINT8",
        ValueType::I8 => "INT8",
        ValueType::U16 => "UINT16",
        ValueType::I16 => "INT16",
        ValueType::U32 => "UINT32",
        ValueType::I32 => "INT32",
        ValueType::F32 => "FLOAT32",
        ValueType::Bool => "BOOL",
        ValueType::String => "STRING",
        ValueType::Array => "ARRAY",
        ValueType::U64 => "UINT64",
        ValueType::I64 => "INT64",
        ValueType::F64 => "FLOAT64",
    }
}

/// A value as gguf-dump prints it: strings quoted (long ones cut), arrays to `items`.
fn show(v: &Value<'_>, items: usize) -> String {
    match v {
        Value::String(s) => {
            let s = s.to_string_lossy();
            let cut: String = s.chars().take(60).collect();
            let quoted = format!("{cut:?}");
            if cut.len() < s.len() {
                format!("{}...", quoted.trim_end_matches('"'))
            } else {
                quoted
            }
        }
        Value::Array(a) => {
            let mut parts: Vec<String> = a.iter().take(items).map(|e| show(&e, items)).collect();
            if a.len() > items {
                parts.push("...".into());
            }
            format!("[{}]", parts.join(", "))
        }
        Value::Bool(b) => if *b { "True" } else { "False" }.into(),
        Value::F32(f) => format!("{f}"),
        Value::F64(f) => format!("{f}"),
        other => other
            .as_integer()
            .map(|i| i.to_string())
            .unwrap_or_default(),
    }
}

fn to_json(v: &Value<'_>, items: usize) -> Json {
    match v {
        Value::String(s) => Json::String(s.to_string_lossy().into_owned()),
        Value::Array(a) => {
            let mut out: Vec<Json> = a.iter().take(items).map(|e| to_json(&e, items)).collect();
            if a.len() > items {
                out.push(json!(format!("... {} more", a.len() - items)));
            }
            Json::Array(out)
        }
        Value::Bool(b) => json!(b),
        Value::F32(f) => json!(f),
        Value::F64(f) => json!(f),
        other => other
            .as_integer()
            .and_then(|i| i64::try_from(i).ok())
            .map_or(Json::Null, |i| json!(i)),
    }
}

fn as_json(model: &SplitGguf<'_>, items: usize) -> Json {
    let first = &model.parts()[0];
    let metadata: serde_json::Map<String, Json> = first
        .metadata()
        .iter()
        .map(|(k, v)| (k.to_string(), to_json(v, items)))
        .collect();
    let tensors: Vec<Json> = model
        .tensors()
        .map(|(part, t)| {
            json!({"name": t.name, "type": t.ty.name(), "dims": t.dims, "bytes": t.size, "offset": t.offset, "part": part})
        })
        .collect();
    json!({
        "version": first.version(),
        "parts": model.parts().len(),
        "alignment": first.alignment(),
        "metadata": metadata,
        "tensors": tensors,
    })
}
