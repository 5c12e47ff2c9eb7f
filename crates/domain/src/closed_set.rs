//! Closed sets: the enums whose every value has one wire string.

/// A closed set of values with one wire string each (severity, status, kind, scope...).
pub trait ClosedSet: Sized + Copy + PartialEq + std::str::FromStr + 'static {
    /// What the value is called in messages ("severity").
    const WHAT: &'static str;
    /// The wire strings of every value, in declaration order.
    fn allowed() -> Vec<&'static str>;
}
