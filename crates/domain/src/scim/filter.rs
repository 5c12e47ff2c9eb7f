//! The list filters posture answers (RFC 7644 §3.4.2.2): one or more `attribute eq value`
//! comparisons joined by `and` — what identity providers send to find a resource before
//! they create it (`userName eq "ada@example.com"`, `externalId eq "..."`,
//! `displayName eq "Admins"`, and Entra ID's membership check `id eq "..." and members eq
//! "..."`). Attribute names are case-insensitive and may carry the core schema's URN;
//! `userName` and a group's `displayName` compare case-insensitively (as they are unique),
//! everything else exactly. Anything else is refused as `invalidFilter`.

use std::str::FromStr;

use super::ScimUserId;
use crate::{Error, Result};

/// Longest filter read.
pub const MAX_FILTER_LEN: usize = 1_024;
/// Comparisons of one filter.
const MAX_CLAUSES: usize = 8;

const USER_URN: &str = "urn:ietf:params:scim:schemas:core:2.0:user:";
const GROUP_URN: &str = "urn:ietf:params:scim:schemas:core:2.0:group:";

/// One comparison of a filter. An `id` or member that is not a UUID matches nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MatchOn {
    /// `id eq`: the resource's id (the raw UUID; `None` if the value is not one).
    Id(Option<uuid::Uuid>),
    /// `userName eq`: the lowercased name.
    UserName(String),
    /// `externalId eq`.
    ExternalId(String),
    /// A user's `displayName eq` (exact).
    DisplayName(String),
    /// A group's `displayName eq`: the lowercased name.
    GroupName(String),
    /// `active eq true|false`.
    Active(bool),
    /// A group's `members eq` / `members.value eq`.
    Member(Option<ScimUserId>),
}

/// A filter of `/Users`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserFilter(pub Vec<MatchOn>);

/// A filter of `/Groups`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupFilter(pub Vec<MatchOn>);

impl FromStr for UserFilter {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        parse(s, USER_URN, |attribute, value| {
            Ok(match (attribute, value) {
                ("id", Value::Text(v)) => MatchOn::Id(uuid::Uuid::parse_str(&v).ok()),
                ("username", Value::Text(v)) => MatchOn::UserName(super::user_name_key(&v)),
                ("externalid", Value::Text(v)) => MatchOn::ExternalId(v),
                ("displayname", Value::Text(v)) => MatchOn::DisplayName(v),
                ("active", Value::Bool(v)) => MatchOn::Active(v),
                (attribute, _) => return Err(unsupported(attribute)),
            })
        })
        .map(Self)
    }
}

impl FromStr for GroupFilter {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        parse(s, GROUP_URN, |attribute, value| {
            Ok(match (attribute, value) {
                ("id", Value::Text(v)) => MatchOn::Id(uuid::Uuid::parse_str(&v).ok()),
                ("displayname", Value::Text(v)) => MatchOn::GroupName(super::group_name_key(&v)),
                ("externalid", Value::Text(v)) => MatchOn::ExternalId(v),
                ("members" | "members.value", Value::Text(v)) => {
                    MatchOn::Member(v.parse::<ScimUserId>().ok())
                }
                (attribute, _) => return Err(unsupported(attribute)),
            })
        })
        .map(Self)
    }
}

enum Value {
    Text(String),
    Bool(bool),
}

fn unsupported(attribute: &str) -> Error {
    let shown: String = attribute.chars().take(64).collect();
    Error::invalid(
        "filter",
        format!("posture filters on `{shown} eq` only for the attributes its documentation lists"),
    )
}

fn parse(
    filter: &str,
    urn: &str,
    clause: impl Fn(&str, Value) -> Result<MatchOn>,
) -> Result<Vec<MatchOn>> {
    if filter.len() > MAX_FILTER_LEN {
        return Err(Error::invalid(
            "filter",
            format!("must be at most {MAX_FILTER_LEN} bytes"),
        ));
    }
    let mut rest = filter.trim_start();
    let mut clauses = Vec::new();
    loop {
        let (attribute, after) = word(rest);
        let (operator, after) = word(after);
        if attribute.is_empty() || !operator.eq_ignore_ascii_case("eq") {
            return Err(Error::invalid(
                "filter",
                "expected `attribute eq \"value\"` (joined by `and`)",
            ));
        }
        let (value, after) = value(after)?;
        let lowered = attribute.to_ascii_lowercase();
        let name = lowered.strip_prefix(urn).unwrap_or(&lowered);
        clauses.push(clause(name, value)?);
        if clauses.len() > MAX_CLAUSES {
            return Err(Error::invalid(
                "filter",
                format!("at most {MAX_CLAUSES} comparisons"),
            ));
        }
        let (joiner, after) = word(after);
        if joiner.is_empty() {
            return Ok(clauses);
        }
        if !joiner.eq_ignore_ascii_case("and") {
            return Err(Error::invalid(
                "filter",
                "comparisons are joined by `and` only",
            ));
        }
        rest = after;
    }
}

/// The next word and what follows it (leading spaces skipped).
fn word(s: &str) -> (&str, &str) {
    let s = s.trim_start();
    let end = s.find(char::is_whitespace).unwrap_or(s.len());
    (&s[..end], &s[end..])
}

/// A comparison value: a JSON string or `true`/`false`.
fn value(s: &str) -> Result<(Value, &str)> {
    let s = s.trim_start();
    if let Some(body) = s.strip_prefix('"') {
        let mut escaped = false;
        for (i, c) in body.char_indices() {
            match c {
                '\\' if !escaped => escaped = true,
                '"' if !escaped => {
                    let text: String = serde_json::from_str(&s[..i + 2]).map_err(|_| {
                        Error::invalid("filter", "a value is not a valid JSON string")
                    })?;
                    if text.chars().any(char::is_control) {
                        return Err(Error::invalid(
                            "filter",
                            "a value has no control characters",
                        ));
                    }
                    return Ok((Value::Text(text), &body[i + 1..]));
                }
                _ => escaped = false,
            }
        }
        return Err(Error::invalid("filter", "a value's quotes are not closed"));
    }
    let (token, after) = word(s);
    match token.to_ascii_lowercase().as_str() {
        "true" => Ok((Value::Bool(true), after)),
        "false" => Ok((Value::Bool(false), after)),
        _ => Err(Error::invalid(
            "filter",
            "a value is a quoted string, true or false",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(s: &str) -> Result<Vec<MatchOn>> {
        s.parse::<UserFilter>().map(|f| f.0)
    }

    #[test]
    fn what_identity_providers_send_is_read() {
        assert_eq!(
            user(r#"userName eq "Ada@Example.com""#).unwrap(),
            vec![MatchOn::UserName("ada@example.com".into())]
        );
        assert_eq!(
            user(r#"externalId eq "a b \"c\"""#).unwrap(),
            vec![MatchOn::ExternalId("a b \"c\"".into())]
        );
        assert_eq!(
            user(r#"urn:ietf:params:scim:schemas:core:2.0:User:userName EQ "x""#).unwrap(),
            vec![MatchOn::UserName("x".into())]
        );
        assert_eq!(
            user("active eq False").unwrap(),
            vec![MatchOn::Active(false)]
        );
        let id = "0196a0f4-8b8e-7c61-8f5e-000000000001";
        let group: GroupFilter = format!(r#"id eq "{id}" and members eq "{id}""#)
            .parse()
            .unwrap();
        let uuid = uuid::Uuid::parse_str(id).unwrap();
        assert_eq!(
            group.0,
            vec![
                MatchOn::Id(Some(uuid)),
                MatchOn::Member(Some(ScimUserId::from_uuid(uuid)))
            ]
        );
    }

    #[test]
    fn an_id_that_is_not_a_uuid_matches_nothing() {
        assert_eq!(user(r#"id eq "nope""#).unwrap(), vec![MatchOn::Id(None)]);
    }

    #[test]
    fn anything_else_is_refused() {
        for bad in [
            "",
            "userName",
            r#"userName co "a""#,
            r#"userName eq "a" or userName eq "b""#,
            r#"userName eq "unclosed"#,
            r#"userName eq a"#,
            r#"password eq "x""#,
            r#"emails[type eq "work"] eq "x""#,
            r#"members eq "x""#,
            r#"userName eq "\u0000""#,
        ] {
            let e = user(bad).unwrap_err();
            assert!(
                matches!(e, Error::Invalid { ref field, .. } if field == "filter"),
                "{bad}"
            );
        }
        let long = format!(r#"userName eq "{}""#, "a".repeat(MAX_FILTER_LEN));
        assert!(user(&long).is_err());
        let many = [r#"userName eq "a""#; MAX_CLAUSES + 1].join(" and ");
        assert!(user(&many).is_err());
    }
}
