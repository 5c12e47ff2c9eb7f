//! Where a webhook may be sent: the rules of a receiver's URL, checked at creation and on
//! every change (the delivery worker checks the addresses a host name resolves to again,
//! through `posture-egress`).

use std::sync::LazyLock;

use regex::Regex;
use url::{Host, Url};

use crate::{egress, error::Error};

/// Longest receiver URL, in characters, as given.
pub const MAX_URL_LEN: usize = 2048;
/// Longest receiver URL as stored (normalised): normalising a URL of [`URL_PATTERN`] only
/// ever adds the `/` of an empty path (migration 5 keeps the same bound).
pub const MAX_STORED_URL_LEN: usize = MAX_URL_LEN + 1;
/// A receiver URL as a regular expression (for the contract, with `format: uri`; and what
/// [`validate_url`] matches, so the two cannot disagree): `http(s)://`, a host (a DNS name
/// whose last label starts with a letter, a dotted-quad IPv4 address, or a bracketed IPv6
/// address), an optional port up to 65535, then path, query and fragment in ASCII characters
/// of RFC 3986 that normalising a URL never expands. Spaces, controls, non-ASCII characters
/// and `"` `'` `<` `>` `\` `^` `` ` `` `{` `|` `}` are refused: percent-encode them (and give
/// an internationalised host name in its `xn--` form).
pub const URL_PATTERN: &str = concat!(
    "^https?://",
    "(\\[[0-9A-Fa-f:.]+\\]",
    "|(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])(\\.(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])){3}",
    "|([A-Za-z0-9-]+\\.)*[A-Za-z][A-Za-z0-9-]*\\.?)",
    "(:(6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[0-9]{1,4}))?",
    "([/?#][!#-&(-;=?-\\[\\]_a-z~]*)?$"
);

static URL_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(URL_PATTERN).expect("URL_PATTERN is a regular expression"));
/// Whether `c` may appear in a receiver URL (see [`URL_PATTERN`]).
fn url_char(c: char) -> bool {
    c.is_ascii_graphic()
        && !matches!(
            c,
            '"' | '\'' | '<' | '>' | '\\' | '^' | '`' | '{' | '|' | '}'
        )
}
/// Which receiver addresses are accepted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TargetPolicy {
    /// Development and tests only: accept `http://` and loopback or private addresses.
    pub allow_private: bool,
}

/// An absolute https URL without credentials, to a host that is not a loopback, private or
/// otherwise non-public address literal (unless the policy allows private targets).
/// Returns the URL in normalised form. Host names are checked again at delivery, on the
/// addresses they resolve to.
pub fn validate_url(text: &str, policy: TargetPolicy) -> Result<String, Error> {
    let url = parse_url(text, policy)?;
    check_target(&url, policy)?;
    // What is stored is the normalised form: check it too (the pattern keeps it within one
    // character of the text, so this guards the database's bound, not the caller).
    let normalised = url.to_string();
    if normalised.chars().count() > MAX_STORED_URL_LEN {
        return Err(Error::invalid(
            FIELD,
            format!(
                "is {} characters once normalised (at most {MAX_STORED_URL_LEN})",
                normalised.chars().count()
            ),
        ));
    }
    Ok(normalised)
}

const FIELD: &str = "webhookUrl";

/// The URL of `text` if its form is one a receiver's may have: bounded, made of URL
/// characters, absolute, https (http when private targets are allowed), without
/// credentials, of the contract's shape.
fn parse_url(text: &str, policy: TargetPolicy) -> Result<Url, Error> {
    if text.chars().count() > MAX_URL_LEN {
        return Err(Error::invalid(
            FIELD,
            format!("must be at most {MAX_URL_LEN} characters"),
        ));
    }
    if let Some(bad) = text.chars().find(|c| !url_char(*c)) {
        return Err(Error::invalid(
            FIELD,
            format!(
                "must not contain {bad:?}: spaces, controls, non-ASCII characters and \
                 \" ' < > \\ ^ ` {{ | }} are percent-encoded in a URL (a host name in its \
                 xn-- form)"
            ),
        ));
    }
    let url = Url::parse(text)
        .map_err(|e| Error::invalid(FIELD, format!("is not an absolute URL ({e})")))?;
    match url.scheme() {
        "https" => {}
        "http" if policy.allow_private => {}
        "http" => return Err(Error::invalid(FIELD, "must use https")),
        other => {
            return Err(Error::invalid(
                FIELD,
                format!("must use https, not {other}"),
            ));
        }
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(Error::invalid(
            FIELD,
            "must not contain credentials (user:password@)",
        ));
    }
    // The contract's shape (its pattern, and `format: uri`: RFC 3986's grammar, stricter
    // than the WHATWG parser's): checked after the rules above, whose reasons say more.
    if !URL_RE.is_match(text) {
        return Err(Error::invalid(
            FIELD,
            "must be http(s)://host[:port][/path][?query][#fragment], the host a DNS name \
             (its last label starting with a letter), an IPv4 address or a bracketed IPv6 \
             address",
        ));
    }
    fluent_uri::Uri::parse(text)
        .map_err(|e| Error::invalid(FIELD, format!("is not an absolute URI ({e})")))?;
    Ok(url)
}

/// Whether the URL's port and host are ones posture may send to: 443 or an unprivileged
/// port, and no loopback, private, link-local or otherwise non-public address literal or
/// `localhost` name (both allowed when private targets are).
fn check_target(url: &Url, policy: TargetPolicy) -> Result<(), Error> {
    let not_public = || {
        Error::invalid(
            FIELD,
            "points to a loopback, private, link-local or otherwise non-public address",
        )
    };
    if !policy.allow_private
        && let Some(port) = url.port()
        && !egress::port_allowed(port)
    {
        return Err(Error::invalid(
            FIELD,
            format!("must use port 443 or a port from 1024 to 65535, not {port}"),
        ));
    }
    match url.host() {
        None => Err(Error::invalid(FIELD, "has no host")),
        Some(_) if policy.allow_private => Ok(()),
        Some(Host::Ipv4(ip)) if !egress::is_public(ip.into()) => Err(not_public()),
        Some(Host::Ipv6(ip)) if !egress::is_public(ip.into()) => Err(not_public()),
        Some(Host::Domain(domain)) => {
            let domain = domain.trim_end_matches('.').to_ascii_lowercase();
            if domain == "localhost" || domain.ends_with(".localhost") {
                Err(not_public())
            } else {
                Ok(())
            }
        }
        Some(_) => Ok(()),
    }
}
