//! Reading the text format back: the samples of a scraped page, for `sluice stats`.

/// One sample: name, labels, value.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub value: f64,
}

impl Sample {
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Parse a page; lines that are not samples (comments, blank, malformed) are skipped.
pub fn parse(text: &str) -> Vec<Sample> {
    text.lines().filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<Sample> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let name_end = line.find(['{', ' '])?;
    let name = line[..name_end].to_string();
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(body) = rest.strip_prefix('{') {
        let b = body.as_bytes();
        let mut i = 0;
        loop {
            while i < b.len() && (b[i] == b',' || b[i] == b' ') {
                i += 1;
            }
            if *b.get(i)? == b'}' {
                i += 1;
                break;
            }
            let eq = i + body[i..].find('=')?;
            let key = body[i..eq].trim().to_string();
            i = eq + 1;
            if *b.get(i)? != b'"' {
                return None;
            }
            i += 1;
            let mut value = String::new();
            let mut chars = body[i..].char_indices();
            loop {
                let (at, c) = chars.next()?;
                match c {
                    '\\' => match chars.next()?.1 {
                        'n' => value.push('\n'),
                        c => value.push(c),
                    },
                    '"' => {
                        i += at + 1;
                        break;
                    }
                    c => value.push(c),
                }
            }
            labels.push((key, value));
        }
        rest = &body[i..];
    }
    let value = rest.split_whitespace().next()?;
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().ok()?,
    };
    Some(Sample {
        name,
        labels,
        value,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exposition::{Exposition, Kind};

    #[test]
    fn reads_back_what_the_exposition_writes() {
        let mut e = Exposition::new();
        e.family("a_total", Kind::Counter, "help");
        e.sample_u64("a_total", &[], 7);
        e.sample_u64("a_total", &[("topic", "x,\"y\"\\z"), ("p", "1")], 8);
        e.sample("b", &[("le", "+Inf")], 1.5);
        let samples = parse(&e.finish());
        assert_eq!(samples.len(), 3);
        assert_eq!(samples[0].value, 7.0);
        assert_eq!(samples[1].label("topic"), Some("x,\"y\"\\z"));
        assert_eq!(samples[1].label("p"), Some("1"));
        assert_eq!(samples[2].label("le"), Some("+Inf"));
        assert_eq!(samples[2].value, 1.5);
        assert!(parse("bad{x=1} 2\nok 3").len() == 1);
    }
}
