//! A triage comment is kept once per write (`triage_changes`), however many findings the
//! write marks: a history record names the change whose comment it carries (`change_id`).
//! [`Comment`] reads a record's comment where it is: the change's, joined to the record
//! (`LEFT JOIN triage_changes` on the customer and the change, so that Citus routes the
//! statement to the customer's node, which a subquery would not), else the record's own
//! column (one written before comments were kept once). (A finding's comment is read apart,
//! only for the findings that need one: `finding_rows::with_comments`.)
//!
//! It is an expression of its own, with a static query id, so the statements reading it stay
//! prepared and cached as before (a literal SQL fragment would have made them be prepared
//! again at every execution).

use std::marker::PhantomData;

use diesel::{
    expression::{AppearsOnTable, Expression, SelectableExpression, ValidGrouping, is_aggregate},
    pg::Pg,
    query_builder::{AstPass, QueryFragment, QueryId},
    result::QueryResult,
    sql_types::{Nullable, Text},
};

use crate::schema::{finding_triage_history, triage_changes};

/// Where a comment is read: its SQL, and the row's own column (the expression is selectable
/// wherever that column and the joined change's comment are).
pub(crate) trait KeptComment: 'static {
    const SQL: &'static str;
    type Column;
}

/// A history record's comment.
#[derive(Debug, Clone, Copy)]
pub(crate) struct OfRecord;

impl KeptComment for OfRecord {
    const SQL: &'static str =
        "coalesce(\"triage_changes\".\"comment\", \"finding_triage_history\".\"comment\")";
    type Column = finding_triage_history::comment;
}

/// The comment of a row of `T`'s table, where it is kept.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Comment<T>(PhantomData<T>);

impl<T> Comment<T> {
    pub(crate) const fn new() -> Self {
        Self(PhantomData)
    }
}

impl<T: KeptComment> QueryId for Comment<T> {
    type QueryId = Self;
    const HAS_STATIC_QUERY_ID: bool = true;
}

impl<T: KeptComment> Expression for Comment<T> {
    type SqlType = Nullable<Text>;
}

impl<T: KeptComment, QS> AppearsOnTable<QS> for Comment<T>
where
    T::Column: AppearsOnTable<QS>,
    diesel::dsl::Nullable<triage_changes::comment>: AppearsOnTable<QS>,
{
}

impl<T: KeptComment, QS> SelectableExpression<QS> for Comment<T>
where
    T::Column: SelectableExpression<QS>,
    diesel::dsl::Nullable<triage_changes::comment>: SelectableExpression<QS>,
{
}

impl<T: KeptComment, GB> ValidGrouping<GB> for Comment<T> {
    type IsAggregate = is_aggregate::Never;
}

impl<T: KeptComment> QueryFragment<Pg> for Comment<T> {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        out.push_sql(T::SQL);
        Ok(())
    }
}
