//! The JSON lines: `figure` first, then the fields in the order a figure
//! gives them (serde_json's map would sort them).

use mosaic_domain::Refusal;
use serde_json::Value;

/// A figure's fields, in output order.
pub type Fields = Vec<(&'static str, Value)>;

/// Why a figure could not be measured: static text, and the refusal code
/// when the bus or the store refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failure {
    /// What failed.
    pub what: &'static str,
    /// The refusal code, if the failure was a refusal.
    pub code: Option<&'static str>,
}

impl Failure {
    /// A failure without a refusal code.
    pub const fn new(what: &'static str) -> Self {
        Self { what, code: None }
    }

    /// A failure the bus or the store answered with `refusal`.
    pub fn refused(what: &'static str, refusal: Refusal) -> Self {
        Self {
            what,
            code: Some(refusal.code()),
        }
    }
}

/// One JSON line.
pub fn line(figure: &str, fields: &[(&'static str, Value)]) -> String {
    let mut out = String::from("{\"figure\":");
    out.push_str(&Value::from(figure).to_string());
    for (key, value) in fields {
        out.push(',');
        out.push_str(&Value::from(*key).to_string());
        out.push(':');
        out.push_str(&value.to_string());
    }
    out.push('}');
    out
}

/// Prints one figure's line.
pub fn emit(figure: &str, fields: Fields) {
    println!("{}", line(figure, &fields));
}

/// Prints one figure's error line.
pub fn emit_failure(figure: &str, failure: &Failure) {
    let mut fields: Fields = vec![("error", Value::from(failure.what))];
    if let Some(code) = failure.code {
        fields.push(("code", Value::from(code)));
    }
    emit(figure, fields);
}

/// `x` rounded to 3 decimals, as a JSON number (`null` if not finite).
pub fn round3(x: f64) -> Value {
    Value::from((x * 1000.0).round() / 1000.0)
}

/// `x` rounded to 1 decimal, as a JSON number (`null` if not finite).
pub fn round1(x: f64) -> Value {
    Value::from((x * 10.0).round() / 10.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figure_comes_first_and_fields_keep_their_order() {
        let text = line(
            "x",
            &[("zeta", Value::from(1)), ("alpha", Value::from("a\"b"))],
        );
        assert_eq!(text, r#"{"figure":"x","zeta":1,"alpha":"a\"b"}"#);
        let parsed: Value = serde_json::from_str(&text).expect("valid JSON");
        assert_eq!(parsed["alpha"], "a\"b");
    }

    #[test]
    fn a_non_finite_number_is_null_not_invalid_json() {
        let text = line("x", &[("ratio", round3(f64::NAN))]);
        assert_eq!(text, r#"{"figure":"x","ratio":null}"#);
    }
}
