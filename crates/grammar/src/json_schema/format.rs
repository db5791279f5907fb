//! `format` values as ECMA-262 patterns, compiled through the [`regex`](crate::regex)
//! front end. Each follows the RFC the specification names; where the RFC allows more
//! than a grammar should generate (comments in e-mail addresses, IPv6 zone ids) the
//! pattern keeps to the common form.

/// The pattern for a format name, if known.
pub fn pattern(name: &str) -> Option<&'static str> {
    Some(match name {
        "date" => DATE,
        "time" => TIME,
        "date-time" => DATE_TIME,
        "duration" => DURATION,
        "email" => EMAIL,
        "hostname" => HOSTNAME,
        "ipv4" => IPV4,
        "ipv6" => IPV6,
        "uri" => URI,
        "uri-reference" => URI_REFERENCE,
        "uuid" => UUID,
        _ => return None,
    })
}

// Days per month exactly, with 29 February only in leap years.
const DATE: &str = concat!(
    "^(\\d{4}-(0[13578]|1[02])-(0[1-9]|[12]\\d|3[01])",
    "|\\d{4}-(0[469]|11)-(0[1-9]|[12]\\d|30)",
    "|\\d{4}-02-(0[1-9]|1\\d|2[0-8])",
    "|(\\d\\d(0[48]|[2468][048]|[13579][26])|([02468][048]|[13579][26])00)-02-29)$"
);

const TIME: &str =
    "^([01]\\d|2[0-3]):[0-5]\\d:([0-5]\\d|60)(\\.\\d+)?([zZ]|[+-]([01]\\d|2[0-3]):[0-5]\\d)$";

const DATE_TIME: &str = concat!(
    "^(\\d{4}-(0[13578]|1[02])-(0[1-9]|[12]\\d|3[01])",
    "|\\d{4}-(0[469]|11)-(0[1-9]|[12]\\d|30)",
    "|\\d{4}-02-(0[1-9]|1\\d|2[0-8])",
    "|(\\d\\d(0[48]|[2468][048]|[13579][26])|([02468][048]|[13579][26])00)-02-29)",
    "[tT ]([01]\\d|2[0-3]):[0-5]\\d:([0-5]\\d|60)(\\.\\d+)?([zZ]|[+-]([01]\\d|2[0-3]):[0-5]\\d)$"
);

// ISO 8601 durations as RFC 3339 appendix A writes them: weeks alone, or date and/or time
// parts in order, at least one part.
const DURATION: &str = concat!(
    "^P(\\d+W|(\\d+Y(\\d+M(\\d+D)?)?|\\d+M(\\d+D)?|\\d+D)(T(\\d+H(\\d+M(\\d+S)?)?|\\d+M(\\d+S)?|\\d+S))?",
    "|T(\\d+H(\\d+M(\\d+S)?)?|\\d+M(\\d+S)?|\\d+S))$"
);

// The common dot-atom form of RFC 5322 addresses with a hostname domain.
const EMAIL: &str = concat!(
    "^[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(\\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*",
    "@[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$"
);

const HOSTNAME: &str = "^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$";

const IPV4: &str =
    "^((25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)\\.){3}(25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)$";

// RFC 4291 text forms: full, compressed with `::`, and with a trailing dotted IPv4.
const IPV6: &str = concat!(
    "^(([0-9a-fA-F]{1,4}:){7}[0-9a-fA-F]{1,4}",
    "|([0-9a-fA-F]{1,4}:){1,7}:",
    "|([0-9a-fA-F]{1,4}:){1,6}:[0-9a-fA-F]{1,4}",
    "|([0-9a-fA-F]{1,4}:){1,5}(:[0-9a-fA-F]{1,4}){1,2}",
    "|([0-9a-fA-F]{1,4}:){1,4}(:[0-9a-fA-F]{1,4}){1,3}",
    "|([0-9a-fA-F]{1,4}:){1,3}(:[0-9a-fA-F]{1,4}){1,4}",
    "|([0-9a-fA-F]{1,4}:){1,2}(:[0-9a-fA-F]{1,4}){1,5}",
    "|[0-9a-fA-F]{1,4}:(:[0-9a-fA-F]{1,4}){1,6}",
    "|:((:[0-9a-fA-F]{1,4}){1,7}|:)",
    "|([0-9a-fA-F]{1,4}:){6}((25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)\\.){3}(25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)",
    "|::([fF]{4}(:0{1,4})?:)?((25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)\\.){3}(25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d))$"
);

// RFC 3986: scheme ":" then the characters a URI may hold (unreserved, reserved, and
// percent-encoded octets).
const URI: &str =
    "^[A-Za-z][A-Za-z0-9+.-]*:([A-Za-z0-9._~!$&'()*+,;=:@/?#\\[\\]-]|%[0-9A-Fa-f]{2})*$";

const URI_REFERENCE: &str = "^([A-Za-z0-9._~!$&'()*+,;=:@/?#\\[\\]-]|%[0-9A-Fa-f]{2})*$";

const UUID: &str = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$";
