//! A statement's SQL rendered once per process, not once per execution.
//!
//! diesel-async renders a query's SQL each time it runs it (walking the query's tree, quoting
//! every identifier into a new `String`) and only then looks its prepared statement up, by
//! the query's type when the type names its SQL. On the detail route that walk was about 5 %
//! of `posture-api`'s CPU (docs/performance.md). [`Rendered`] keeps the query as it is (its
//! binds, its rows, its prepared statement) and answers the rendering with the SQL of the
//! first execution of the same type.
//!
//! Only a query whose type determines its SQL is cached: one with a static query id
//! (`QueryId::HAS_STATIC_QUERY_ID`, the guarantee diesel's own statement cache relies on)
//! that is safe to cache as a prepared statement (which rules out the constructs whose SQL
//! depends on the values bound: an insert's optional values, an `UPDATE`, literal SQL). Any
//! other query is rendered each time, as before; a boxed query (its filters chosen at run
//! time) has no static query id, so it always is. [`eq_any`] is diesel's `eq_any` with a
//! static query id, for the statements that read rows by a list of ids.

use std::{
    any::TypeId,
    collections::HashMap,
    sync::{LazyLock, RwLock},
};

use diesel::{
    expression::{AppearsOnTable, Expression, SelectableExpression, ValidGrouping},
    pg::{Pg, PgQueryBuilder},
    query_builder::{AstPass, Query, QueryBuilder, QueryFragment, QueryId},
    result::QueryResult,
    sql_types::{Array, Bool, SingleValue, SqlType, is_nullable::NotNull},
};

/// The SQL of each query type rendered so far, by the type's query id. Bounded by the
/// query types of the program.
static SQL: LazyLock<RwLock<HashMap<TypeId, &'static str>>> = LazyLock::new(Default::default);

/// A query whose SQL is rendered once per query type (see the module's documentation).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rendered<Q>(Q);

/// [`Rendered`] for any query: `query.rendered_once().get_result(conn)`.
pub(crate) trait RenderOnce: Sized {
    fn rendered_once(self) -> Rendered<Self> {
        Rendered(self)
    }
}

impl<Q: Query> RenderOnce for Q {}

impl<Q: Query> Query for Rendered<Q> {
    type SqlType = Q::SqlType;
}

impl<Q: QueryId> QueryId for Rendered<Q> {
    type QueryId = Q::QueryId;
    const HAS_STATIC_QUERY_ID: bool = Q::HAS_STATIC_QUERY_ID;
}

impl<Q: QueryFragment<Pg> + QueryId> QueryFragment<Pg> for Rendered<Q> {
    fn walk_ast<'b>(&'b self, pass: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        self.0.walk_ast(pass)
    }

    fn to_sql(&self, out: &mut PgQueryBuilder, backend: &Pg) -> QueryResult<()> {
        // The id first: a query of no static id is not walked for the flag.
        let Some(id) =
            Q::query_id().filter(|_| matches!(self.0.is_safe_to_cache_prepared(backend), Ok(true)))
        else {
            return self.0.to_sql(out, backend);
        };
        let cached = SQL
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(&id)
            .copied();
        let sql = match cached {
            Some(sql) => sql,
            None => {
                let mut builder = PgQueryBuilder::default();
                self.0.to_sql(&mut builder, backend)?;
                let sql = builder.finish();
                // Kept for the process's life, once per type: a rendering that lost a race
                // is dropped.
                *SQL.write()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .entry(id)
                    .or_insert_with(|| sql.leak())
            }
        };
        out.push_sql(sql);
        Ok(())
    }
}

/// `column = ANY($n)`, the values bound as one array: the SQL diesel's `eq_any` renders on
/// PostgreSQL, but with a static query id, so a statement using it can be [`Rendered`] once.
/// diesel's own node (`Many`) has none: on other backends its SQL grows with the values.
/// For a column that is not nullable (its result is `Bool`).
#[derive(Debug, Clone, Copy, QueryId, ValidGrouping)]
pub(crate) struct EqAny<C, V> {
    column: C,
    values: V,
}

/// `column = ANY(values)` ([`EqAny`]): `eq_any(findings::id, &ids)`.
pub(crate) fn eq_any<C, T>(
    column: C,
    values: T,
) -> EqAny<C, <T as diesel::expression::AsExpression<Array<C::SqlType>>>::Expression>
where
    C: Expression,
    C::SqlType: SqlType<IsNull = NotNull> + SingleValue + 'static,
    T: diesel::expression::AsExpression<Array<C::SqlType>>,
{
    // diesel renders `IN (...)` for a column that is itself an array (`= ANY` would compare
    // it with each element's elements): such a column fails the build here (when the call
    // is compiled to code; `cargo check` alone does not evaluate it).
    const {
        assert!(
            !<C::SqlType as SqlType>::IS_ARRAY,
            "eq_any takes a column of scalars, not of arrays"
        )
    };
    EqAny {
        column,
        values: values.as_expression(),
    }
}

impl<C, V> Expression for EqAny<C, V>
where
    C: Expression<SqlType: 'static>,
    V: Expression<SqlType = Array<C::SqlType>>,
{
    type SqlType = Bool;
}

impl<C, V, QS> AppearsOnTable<QS> for EqAny<C, V>
where
    C: AppearsOnTable<QS>,
    V: AppearsOnTable<QS>,
    Self: Expression,
{
}

impl<C, V, QS> SelectableExpression<QS> for EqAny<C, V>
where
    C: SelectableExpression<QS>,
    V: SelectableExpression<QS>,
    Self: AppearsOnTable<QS>,
{
}

impl<C: QueryFragment<Pg>, V: QueryFragment<Pg>> QueryFragment<Pg> for EqAny<C, V> {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        // Parenthesised, as diesel groups its own.
        out.push_sql("(");
        self.column.walk_ast(out.reborrow())?;
        out.push_sql(" = ANY(");
        self.values.walk_ast(out.reborrow())?;
        out.push_sql("))");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use diesel::{debug_query, prelude::*};

    use super::*;
    use crate::schema::findings;

    fn sql_of(query: &impl QueryFragment<Pg>) -> String {
        let mut builder = PgQueryBuilder::default();
        query.to_sql(&mut builder, &Pg).unwrap();
        builder.finish()
    }

    #[test]
    fn a_static_query_is_rendered_as_diesel_renders_it_and_binds_its_own_values() {
        let query = |id: &str| {
            findings::table
                .filter(findings::id.eq(id.to_owned()))
                .select(findings::title)
        };
        let plain = sql_of(&query("a"));
        assert_eq!(sql_of(&query("a").rendered_once()), plain);
        // The second of the type comes from the cache, its values its own.
        let second = query("b").rendered_once();
        assert_eq!(sql_of(&second), plain);
        assert!(
            debug_query::<Pg, _>(&second)
                .to_string()
                .ends_with("-- binds: [\"b\"]"),
            "{}",
            debug_query::<Pg, _>(&second)
        );
        assert!(cached(&second), "the type's SQL is kept");
    }

    fn cached<Q: QueryId>(_: &Q) -> bool {
        Q::query_id().is_some_and(|id| SQL.read().unwrap().contains_key(&id))
    }

    #[test]
    fn eq_any_is_diesels_eq_any_with_a_static_query_id() {
        let ids = |ids: &[&str]| ids.iter().map(|id| (*id).to_owned()).collect::<Vec<_>>();
        let (one, three) = (ids(&["a"]), ids(&["a", "b", "c"]));
        let ours = |ids| {
            findings::table
                .filter(eq_any(findings::id, ids))
                .select(findings::title)
        };
        let diesels = |ids| {
            findings::table
                .filter(findings::id.eq_any(ids))
                .select(findings::title)
        };
        assert_eq!(sql_of(&ours(&one)), sql_of(&diesels(&one)));
        assert_eq!(sql_of(&ours(&three)), sql_of(&diesels(&three)));
        assert_eq!(
            debug_query::<Pg, _>(&ours(&three)).to_string(),
            debug_query::<Pg, _>(&diesels(&three)).to_string(),
            "the same binds"
        );
        let first = ours(&one).rendered_once();
        assert_eq!(sql_of(&first), sql_of(&diesels(&one)));
        assert!(
            cached(&first),
            "its SQL is kept, whatever the number of values"
        );
        assert_eq!(
            sql_of(&ours(&three).rendered_once()),
            sql_of(&diesels(&three))
        );
    }

    #[test]
    fn a_boxed_query_is_rendered_each_time() {
        let boxed = |severity: Option<&str>| {
            let mut query = findings::table.select(findings::id).into_boxed::<Pg>();
            if let Some(severity) = severity {
                query = query.filter(findings::severity.eq(severity.to_owned()));
            }
            query
        };
        let without = sql_of(&boxed(None).rendered_once());
        let with = sql_of(&boxed(Some("high")).rendered_once());
        assert_ne!(without, with);
        assert_eq!(with, sql_of(&boxed(Some("high"))));
        assert_eq!(without, sql_of(&boxed(None)));
        assert!(!cached(&boxed(None).rendered_once()));
    }
}
