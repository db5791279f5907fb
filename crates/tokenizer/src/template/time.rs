//! The date `strftime_now` formats, with the strftime directives chat templates use.

/// A UTC date and time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DateTime {
    pub year: i32,
    /// 1..=12
    pub month: u32,
    /// 1..=31
    pub day: u32,
    pub hour: u32,
    pub minute: u32,
    pub second: u32,
}

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const DAYS: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];

impl DateTime {
    /// The date of a Unix timestamp (seconds, UTC).
    pub fn from_unix(secs: i64) -> Self {
        let days = secs.div_euclid(86_400);
        let rem = secs.rem_euclid(86_400);
        // Howard Hinnant's civil_from_days.
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z - era * 146_097;
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
        let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
        let year = (yoe + era * 400 + i64::from(month <= 2)) as i32;
        DateTime {
            year,
            month,
            day,
            hour: (rem / 3600) as u32,
            minute: (rem / 60 % 60) as u32,
            second: (rem % 60) as u32,
        }
    }

    /// The system clock (UTC). In wasm32-unknown-unknown, which has no clock, the Unix
    /// epoch: pass [`super::ChatRequest::now`] there.
    pub fn now() -> Self {
        #[cfg(not(all(target_arch = "wasm32", target_os = "unknown")))]
        {
            let secs = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs() as i64)
                .unwrap_or(0);
            Self::from_unix(secs)
        }
        #[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
        {
            Self::from_unix(0)
        }
    }

    fn days_from_civil(&self) -> i64 {
        let y = i64::from(self.year) - i64::from(self.month <= 2);
        let era = y.div_euclid(400);
        let yoe = y - era * 400;
        let m = i64::from(self.month);
        let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(self.day) - 1;
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        era * 146_097 + doe - 719_468
    }

    fn weekday(&self) -> usize {
        // 1970-01-01 was a Thursday (index 3 from Monday).
        (self.days_from_civil() + 3).rem_euclid(7) as usize
    }

    fn day_of_year(&self) -> i64 {
        let jan1 = DateTime {
            month: 1,
            day: 1,
            ..*self
        };
        self.days_from_civil() - jan1.days_from_civil() + 1
    }

    /// Formats with C/Python strftime directives (`%d %b %Y`, `%-d`, `%H:%M`…).
    pub fn strftime(&self, fmt: &str) -> String {
        let mut out = String::new();
        let mut chars = fmt.chars().peekable();
        while let Some(c) = chars.next() {
            if c != '%' {
                out.push(c);
                continue;
            }
            let no_pad = chars.peek() == Some(&'-');
            if no_pad {
                chars.next();
            }
            let Some(d) = chars.next() else {
                out.push('%');
                break;
            };
            let num = |v: i64, width: usize| {
                if no_pad {
                    v.to_string()
                } else {
                    format!("{v:0width$}")
                }
            };
            let hour12 = if self.hour.is_multiple_of(12) {
                12
            } else {
                self.hour % 12
            };
            match d {
                'Y' => out.push_str(&self.year.to_string()),
                'y' => out.push_str(&num(i64::from(self.year.rem_euclid(100)), 2)),
                'm' => out.push_str(&num(self.month.into(), 2)),
                'd' => out.push_str(&num(self.day.into(), 2)),
                'e' => out.push_str(&format!("{:>2}", self.day)),
                'H' => out.push_str(&num(self.hour.into(), 2)),
                'I' => out.push_str(&num(hour12.into(), 2)),
                'M' => out.push_str(&num(self.minute.into(), 2)),
                'S' => out.push_str(&num(self.second.into(), 2)),
                'p' => out.push_str(if self.hour < 12 { "AM" } else { "PM" }),
                'j' => out.push_str(&num(self.day_of_year(), 3)),
                'B' => out.push_str(MONTHS[(self.month - 1) as usize % 12]),
                'b' | 'h' => out.push_str(&MONTHS[(self.month - 1) as usize % 12][..3]),
                'A' => out.push_str(DAYS[self.weekday()]),
                'a' => out.push_str(&DAYS[self.weekday()][..3]),
                'F' => out.push_str(&format!(
                    "{:04}-{:02}-{:02}",
                    self.year, self.month, self.day
                )),
                'T' => out.push_str(&format!(
                    "{:02}:{:02}:{:02}",
                    self.hour, self.minute, self.second
                )),
                '%' => out.push('%'),
                other => {
                    out.push('%');
                    out.push(other);
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::DateTime;

    #[test]
    fn dates() {
        let d = DateTime::from_unix(1_732_838_400); // 2024-11-29 00:00:00
        assert_eq!((d.year, d.month, d.day), (2024, 11, 29));
        assert_eq!(d.strftime("%d %b %Y"), "29 Nov 2024");
        assert_eq!(
            d.strftime("%A, %B %-d, %Y %H:%M %j"),
            "Friday, November 29, 2024 00:00 334"
        );
        assert_eq!(
            DateTime::from_unix(0).strftime("%F %T %a"),
            "1970-01-01 00:00:00 Thu"
        );
    }
}
