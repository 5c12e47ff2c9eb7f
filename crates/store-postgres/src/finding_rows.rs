//! A finding as its row is read (the detail, a list's page, the events feed, the export),
//! and the domain value made of it, its triage as it reads at a given time.
//!
//! A triage comment is kept once per write (`triage_changes`), however many findings the
//! write marks: a finding's row names the change that keeps it (`triage_change_id`), or
//! holds its own (a mark written before comments were kept once). The rows are read
//! without the comments ([`read_finding`]), then the comments the findings need are read
//! in one statement ([`with_comments`]): none for a page of untriaged findings, where a
//! join would have probed the changes once a row.

use chrono::{DateTime, Utc};
use diesel::{
    deserialize::{self, FromSql, FromSqlRow},
    pg::{Pg, PgValue},
    prelude::*,
    sql_types::Text,
};
use posture_domain::{
    CloudTenantId, FindingId, KeyId, Result,
    finding::{Finding, FindingStatus, FindingType, Severity},
    identity::IdentitySummary,
    triage::{Triage, TriageActor, TriageReason, TriageState},
};
use uuid::Uuid;

use crate::{
    error::{corrupt, db_error},
    identities::IdentitySummaryRow,
    schema::findings,
    text::{At, Parsed},
};

/// A finding type read from its column without a `String` (a type of the catalogue is
/// held as the catalogue's text). A value that is not a finding type (the column has no
/// `CHECK`) is kept for [`read_finding`] to refuse, so it fails that finding alone, as a
/// corrupt id does, and not the whole statement: a triage then skips the finding it
/// cannot read, and the error names the value.
#[derive(Debug, FromSqlRow)]
pub(crate) struct TypeColumn(Result<FindingType, posture_domain::Error>);

impl FromSql<Text, Pg> for TypeColumn {
    fn from_sql(value: PgValue<'_>) -> deserialize::Result<Self> {
        let text = std::str::from_utf8(value.as_bytes())?;
        Ok(Self(text.parse()))
    }
}

#[derive(Queryable, Selectable)]
#[diesel(table_name = findings, check_for_backend(diesel::pg::Pg))]
pub(crate) struct FindingRow {
    pub(crate) id: String,
    cloud_tenant_id: Uuid,
    finding_type: TypeColumn,
    severity: Parsed<Severity>,
    status: Parsed<FindingStatus>,
    title: String,
    description: Option<String>,
    #[diesel(deserialize_as = At)]
    detected_at: DateTime<Utc>,
    #[diesel(deserialize_as = At)]
    updated_at: DateTime<Utc>,
    #[diesel(deserialize_as = At)]
    modified_at: DateTime<Utc>,
    triage_state: Parsed<TriageState>,
    triage_reason: Option<Parsed<TriageReason>>,
    triage_comment: Option<String>,
    triage_change_id: Option<Uuid>,
    triage_expires_at: Option<DateTime<Utc>>,
    triage_updated_at: Option<DateTime<Utc>>,
    triage_key_id: Option<Uuid>,
    triage_key_name: Option<String>,
}

impl FindingRow {
    /// The triage as stored (the last mark written, expired or not).
    fn stored_triage(&mut self) -> Triage {
        Triage {
            state: self.triage_state.0,
            reason: self.triage_reason.as_ref().map(|r| r.0),
            comment: self.triage_comment.take(),
            expires_at: self.triage_expires_at,
            updated_at: self.triage_updated_at,
            updated_by: self.triage_key_id.map(|id| TriageActor {
                key_id: KeyId::from_uuid(id),
                key_name: self.triage_key_name.take().unwrap_or_default(),
            }),
        }
    }
}

/// A finding row and its identity (absent when the finding names none).
pub(crate) type FindingWithIdentity = (FindingRow, Option<IdentitySummaryRow>);

/// A finding read from its row, its triage as it reads at `now`; its comment still to be
/// read when its row names the change that keeps it ([`with_comments`]).
pub(crate) struct Read {
    pub(crate) finding: Finding,
    kept_by: Option<Uuid>,
}

/// The finding of a row, its triage as it reads at `now` (its comment, when a change keeps
/// it, to be read by [`with_comments`]).
pub(crate) fn read_finding(
    (mut row, identity): FindingWithIdentity,
    now: DateTime<Utc>,
) -> Result<Read> {
    let triage = row.stored_triage().effective(now);
    // An expired mark reads as `untriaged`, without its comment.
    let kept_by = row
        .triage_change_id
        .filter(|_| triage.state != TriageState::Untriaged);
    Ok(Read {
        finding: Finding {
            id: FindingId::try_from(row.id).map_err(|e| corrupt("finding id", e))?,
            cloud_tenant_id: CloudTenantId::from_uuid(row.cloud_tenant_id),
            finding_type: row.finding_type.0.map_err(|e| corrupt("finding type", e))?,
            severity: row.severity.0,
            status: row.status.0,
            title: row.title,
            description: row.description,
            identity: identity.map(IdentitySummary::try_from).transpose()?,
            detected_at: row.detected_at,
            updated_at: row.updated_at,
            modified_at: row.modified_at,
            triage,
        },
        kept_by,
    })
}

/// The findings of `reads`, each with its comment: those kept once per write read in one
/// statement of the customer's (none when no finding needs one).
pub(crate) async fn with_comments<C>(
    conn: &mut C,
    customer: Uuid,
    reads: Vec<Read>,
) -> QueryResult<Vec<Finding>>
where
    C: diesel_async::AsyncConnectionCore<Backend = Pg> + Send,
{
    use crate::{rendered::eq_any, schema::triage_changes};
    let mut changes: Vec<Uuid> = reads.iter().filter_map(|r| r.kept_by).collect();
    if changes.is_empty() {
        return Ok(reads.into_iter().map(|r| r.finding).collect());
    }
    changes.sort_unstable();
    changes.dedup();
    let query = triage_changes::table
        .filter(triage_changes::customer_id.eq(customer))
        .filter(eq_any(triage_changes::id, &changes))
        .select((triage_changes::id, triage_changes::comment));
    let comments: hashbrown::HashMap<Uuid, String> =
        diesel_async::RunQueryDsl::load::<(Uuid, String)>(query, conn)
            .await?
            .into_iter()
            .collect();
    Ok(reads
        .into_iter()
        .map(|read| {
            let mut finding = read.finding;
            if let Some(change) = read.kept_by {
                finding.triage.comment = comments.get(&change).cloned();
            }
            finding
        })
        .collect())
}

/// A page's findings in the order of its ids, each placed in its slot as its row arrives:
/// a row is converted where it lands, with no `Vec` of rows in between (which grew by
/// doubling and moved each row of 352 bytes once more). Ids without a row are
/// skipped; a row whose id was not asked for is ignored. `ids` is a page or a delivery's
/// chunk of ids (bounded, see below).
struct InOrder<'a> {
    position: hashbrown::HashMap<&'a str, usize>,
    slots: Vec<Option<Read>>,
    now: DateTime<Utc>,
}

impl<'a> InOrder<'a> {
    /// Slots for `ids`, each row's triage to be read as it reads at `now`.
    fn new<S: AsRef<str>>(ids: &'a [S], now: DateTime<Utc>) -> Self {
        // hashbrown's default hasher (foldhash): SipHash cost about 1 % of a list's CPU
        // here. foldhash does not resist a flood of colliding keys; the bound does: the ids
        // are a page (at most `MAX_LIMIT`, 500) or a delivery's chunk (at most
        // `CHUNK_SIZE`, 100).
        let position = ids
            .iter()
            .enumerate()
            .map(|(i, id)| (id.as_ref(), i))
            .collect();
        Self {
            position,
            slots: (0..ids.len()).map(|_| None).collect(),
            now,
        }
    }

    /// Converts `row` into its finding in its slot; a row it cannot read fails the page.
    fn place(&mut self, row: FindingWithIdentity) -> Result<()> {
        if let Some(&i) = self.position.get(row.0.id.as_str()) {
            self.slots[i] = Some(read_finding(row, self.now)?);
        }
        Ok(())
    }

    /// The findings placed, in the order of the ids.
    fn into_reads(self) -> Vec<Read> {
        // Sized up front: `flatten` cannot say how many, and a page grown by doubling
        // moves its findings (320 bytes each) again at each step.
        let mut reads = Vec::with_capacity(self.slots.len());
        reads.extend(self.slots.into_iter().flatten());
        reads
    }
}

/// The findings read of the rows `rows` streams, in the order of `ids` (see [`InOrder`]);
/// their comments still to be read ([`with_comments`]).
pub(crate) async fn findings_in_order_from<S, R>(
    ids: &[S],
    rows: R,
    now: DateTime<Utc>,
) -> Result<Vec<Read>>
where
    S: AsRef<str>,
    R: futures_util::Stream<Item = QueryResult<FindingWithIdentity>>,
{
    use futures_util::TryStreamExt;
    let mut page = InOrder::new(ids, now);
    let mut rows = std::pin::pin!(rows);
    while let Some(row) = rows.try_next().await.map_err(db_error)? {
        page.place(row)?;
    }
    Ok(page.into_reads())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The findings of `rows` in the order of `ids`, read as the store reads a stream of
    /// rows (one that is always ready).
    fn findings_in_order<S: AsRef<str>>(
        ids: &[S],
        rows: Vec<FindingWithIdentity>,
        now: DateTime<Utc>,
    ) -> Result<Vec<Finding>> {
        use futures_util::FutureExt;
        let rows = futures_util::stream::iter(rows.into_iter().map(Ok));
        findings_in_order_from(ids, rows, now)
            .now_or_never()
            .expect("a ready stream")
            .map(|reads| reads.into_iter().map(|r| r.finding).collect())
    }

    fn row(id: &str) -> FindingWithIdentity {
        let at = DateTime::from_timestamp(1_800_000_000, 0).unwrap();
        let row = FindingRow {
            id: id.to_owned(),
            cloud_tenant_id: Uuid::nil(),
            finding_type: TypeColumn("tier0_permanent_root".parse()),
            severity: Parsed(Severity::High),
            status: Parsed(FindingStatus::Open),
            title: format!("title of {id}"),
            description: None,
            detected_at: at,
            updated_at: at,
            modified_at: at,
            triage_state: Parsed(TriageState::Untriaged),
            triage_reason: None,
            triage_comment: None,
            triage_change_id: None,
            triage_expires_at: None,
            triage_updated_at: None,
            triage_key_id: None,
            triage_key_name: None,
        };
        (row, None)
    }

    fn ids_of(findings: &[Finding]) -> Vec<&str> {
        findings.iter().map(|f| f.id.as_str()).collect()
    }

    #[test]
    fn findings_come_in_the_order_of_the_ids_and_ids_without_a_row_are_skipped() {
        let now = DateTime::from_timestamp(1_800_000_100, 0).unwrap();
        let rows = vec![row("f-3"), row("f-1"), row("f-9"), row("f-2")];
        let findings = findings_in_order(&["f-1", "f-2", "f-4", "f-3"], rows, now).unwrap();
        // f-9 was not asked for; f-4 has no row.
        assert_eq!(ids_of(&findings), ["f-1", "f-2", "f-3"]);
        assert_eq!(findings[2].title, "title of f-3");
    }

    #[test]
    fn a_corrupt_row_not_asked_for_is_not_read() {
        let now = DateTime::from_timestamp(1_800_000_100, 0).unwrap();
        let mut bad = row("f-2");
        bad.0.finding_type = TypeColumn("Not A Type".parse());
        let findings = findings_in_order(&["f-1"], vec![bad, row("f-1")], now).unwrap();
        assert_eq!(ids_of(&findings), ["f-1"]);
    }

    #[test]
    fn a_corrupt_row_fails_the_page_rather_than_vanishing_from_it() {
        let now = DateTime::from_timestamp(1_800_000_100, 0).unwrap();
        let mut bad = row("f-2");
        bad.0.finding_type = TypeColumn("Not A Type".parse());
        let rows = vec![row("f-1"), bad];
        let refused = findings_in_order(&["f-1", "f-2"], rows, now).unwrap_err();
        // The cause an `ERROR` line logs names the column and the value.
        let reason = std::error::Error::source(&refused).map(ToString::to_string);
        let reason = reason.unwrap_or_default();
        assert!(reason.contains("finding type"), "{reason}");
        assert!(reason.contains("Not A Type"), "{reason}");
        // A corrupt id is refused the same way.
        let rows = vec![row("f-1"), row("f 2")];
        assert!(findings_in_order(&["f-1", "f 2"], rows, now).is_err());
    }

    #[test]
    fn a_type_column_reads_any_text_and_keeps_a_bad_value_for_the_finding() {
        // text's oid (not read by the conversion).
        const TEXT: std::num::NonZeroU32 = std::num::NonZeroU32::new(25).unwrap();
        let read = |text: &[u8]| TypeColumn::from_sql(PgValue::new(text, &TEXT));
        let known = read(b"mfa_not_enforced").unwrap().0.unwrap();
        assert_eq!(known.as_str(), "mfa_not_enforced");
        assert!(known.is_known());
        let newer = read(b"oauth_consent_grant").unwrap().0.unwrap();
        assert!(!newer.is_known());
        assert!(read(b"Not A Type").unwrap().0.is_err());
        // Bytes that are not UTF-8 are not text: the column itself is refused.
        assert!(read(&[0xff, 0xfe]).is_err());
    }
}
