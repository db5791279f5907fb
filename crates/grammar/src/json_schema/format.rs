//! `format` values as ECMA-262 patterns, compiled through the [`regex`](crate::regex)
//! front end.
//!
//! Each follows the RFC the specification names, and never accepts what the RFC forbids.
//! Where the RFC needs more than a grammar can check, the pattern keeps to a stricter
//! common form (a *narrowing*, recorded in the report): e-mail local parts are dot-atoms
//! (no quoted strings or address literals); hostnames have no A-labels (`xn--`, whose
//! punycode a grammar cannot decode) and at most 223 characters (two labels of up to 63,
//! then up to three of up to 31, under the 253 limit); leap seconds only as `23:59:60`
//! in UTC.

/// The pattern for a format name, if known.
pub fn pattern(name: &str) -> Option<String> {
    Some(match name {
        "date" => format!("^{DATE}$"),
        "time" => format!("^{TIME}$"),
        "date-time" => format!("^{DATE}[tT]{TIME}$"),
        "duration" => DURATION.to_owned(),
        "email" => format!("^{LOCAL}@{}$", hostname()),
        "hostname" => format!("^{}$", hostname()),
        "ipv4" => format!("^{IPV4}$"),
        "ipv6" => format!("^({})$", ipv6()),
        "uri" => format!("^{}$", uri()),
        "uri-reference" => format!("^({}|{})$", uri(), relative_ref()),
        "uuid" => UUID.to_owned(),
        _ => return None,
    })
}

// Days per month exactly, with 29 February only in leap years (divisible by 4 but not by
// 100, or by 400).
const DATE: &str = concat!(
    "(\\d{4}-(0[13578]|1[02])-(0[1-9]|[12]\\d|3[01])",
    "|\\d{4}-(0[469]|11)-(0[1-9]|[12]\\d|30)",
    "|\\d{4}-02-(0[1-9]|1\\d|2[0-8])",
    "|(\\d\\d(0[48]|[2468][048]|[13579][26])|([02468][048]|[13579][26])00)-02-29)"
);

const TIME: &str = concat!(
    "(([01]\\d|2[0-3]):[0-5]\\d:[0-5]\\d(\\.\\d+)?([zZ]|[+-]([01]\\d|2[0-3]):[0-5]\\d)",
    "|23:59:60(\\.\\d+)?([zZ]|[+-]00:00))"
);

// ISO 8601 durations as RFC 3339 appendix A writes them: weeks alone, or date and/or time
// parts in order, at least one part.
const DURATION: &str = concat!(
    "^P(\\d+W|(\\d+Y(\\d+M(\\d+D)?)?|\\d+M(\\d+D)?|\\d+D)(T(\\d+H(\\d+M(\\d+S)?)?|\\d+M(\\d+S)?|\\d+S))?",
    "|T(\\d+H(\\d+M(\\d+S)?)?|\\d+M(\\d+S)?|\\d+S))$"
);

const LOCAL: &str = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(\\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*";

/// A hostname label of 1 to `max` letters, digits and hyphens, not starting or ending
/// with a hyphen, and without hyphens at both positions 3 and 4 (RFC 5891 reserves those:
/// `xn--` A-labels).
fn label(max: u32) -> String {
    let a = "[A-Za-z0-9]";
    let h = "[A-Za-z0-9-]";
    format!(
        "({a}|{a}{a}|{a}{h}{a}|{a}{h}{h}{a}|{a}{h}({a}{h}|-{a}){h}{{0,{}}}{a})",
        max - 5
    )
}

fn hostname() -> String {
    format!(
        "{l63}(\\.{l63})?(\\.{l31}){{0,3}}",
        l63 = label(63),
        l31 = label(31)
    )
}

const IPV4: &str =
    "((25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)\\.){3}(25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)";

/// RFC 4291 text forms: full, compressed with `::`, and with a trailing dotted IPv4.
fn ipv6() -> String {
    let h = "[0-9a-fA-F]{1,4}";
    // The last 32 bits: two groups or a dotted IPv4.
    let ls32 = format!("({h}:{h}|{IPV4})");
    [
        format!("({h}:){{6}}{ls32}"),
        format!("::({h}:){{5}}{ls32}"),
        format!("({h})?::({h}:){{4}}{ls32}"),
        format!("(({h}:){{0,1}}{h})?::({h}:){{3}}{ls32}"),
        format!("(({h}:){{0,2}}{h})?::({h}:){{2}}{ls32}"),
        format!("(({h}:){{0,3}}{h})?::{h}:{ls32}"),
        format!("(({h}:){{0,4}}{h})?::{ls32}"),
        format!("(({h}:){{0,5}}{h})?::{h}"),
        format!("(({h}:){{0,6}}{h})?::"),
    ]
    .map(|alt| format!("({alt})"))
    .join("|")
}

// RFC 3986 character sets.
// The hyphen goes last in each class, where it is literal.
const UNRESERVED: &str = "A-Za-z0-9._~";
const SUB_DELIMS: &str = "!$&'()*+,;=";
const PCT: &str = "%[0-9A-Fa-f]{2}";

fn pchar() -> String {
    format!("([{UNRESERVED}{SUB_DELIMS}:@-]|{PCT})")
}

fn authority() -> String {
    let userinfo = format!("([{UNRESERVED}{SUB_DELIMS}:-]|{PCT})*@");
    let reg_name = format!("([{UNRESERVED}{SUB_DELIMS}-]|{PCT})*");
    let ip_literal = format!("\\[({})\\]", ipv6());
    format!("({userinfo})?({ip_literal}|{reg_name})(:\\d*)?")
}

/// `("?" query)? ("#" fragment)?`
fn query_fragment() -> String {
    let p = pchar();
    format!("(\\?({p}|[/?])*)?(#({p}|[/?])*)?")
}

fn uri() -> String {
    let p = pchar();
    let segment = format!("{p}*");
    let hier = format!(
        "(//{auth}(/{segment})*|/({p}+(/{segment})*)?|{p}+(/{segment})*|)",
        auth = authority()
    );
    format!("[A-Za-z][A-Za-z0-9+.-]*:{hier}{}", query_fragment())
}

fn relative_ref() -> String {
    let p = pchar();
    let segment = format!("{p}*");
    let nc = format!("([{UNRESERVED}{SUB_DELIMS}@-]|{PCT})");
    let part = format!(
        "(//{auth}(/{segment})*|/({p}+(/{segment})*)?|{nc}+(/{segment})*|)",
        auth = authority()
    );
    format!("{part}{}", query_fragment())
}

const UUID: &str = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$";
