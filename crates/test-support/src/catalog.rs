//! The migrated schema as PostgreSQL's catalog describes it: tables, columns, keys and
//! indexes. Read by the schema tests (the keys every customer table must keep) and by
//! [`diesel_schema`], which writes `store-postgres/src/schema.rs` from it
//! (`cargo xtask schema`), so the hand-kept Diesel view cannot drift from `migrations/`.

use std::fmt::Write as _;

use diesel::{QueryableByName, sql_types::Text};
use diesel_async::{AsyncPgConnection, RunQueryDsl};

/// A column of a table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Column {
    pub name: String,
    /// PostgreSQL's type name (`uuid`, `_text` for `text[]`).
    pub type_name: String,
    pub nullable: bool,
}

/// A table of the `public` schema, in creation order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Table {
    pub name: String,
    pub columns: Vec<Column>,
    pub primary_key: Vec<String>,
}

/// An index (primary keys and unique constraints included).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Index {
    pub table: String,
    pub name: String,
    pub unique: bool,
    pub primary: bool,
    pub columns: Vec<String>,
}

/// A foreign key: `columns` of `table` reference `referenced_columns` of `referenced_table`,
/// pairwise.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForeignKey {
    pub table: String,
    pub name: String,
    pub columns: Vec<String>,
    pub referenced_table: String,
    pub referenced_columns: Vec<String>,
}

/// Diesel's own bookkeeping table, not part of posture's schema.
const MIGRATIONS_TABLE: &str = "__diesel_schema_migrations";

#[derive(QueryableByName)]
struct ColumnRow {
    #[diesel(sql_type = Text)]
    table_name: String,
    #[diesel(sql_type = Text)]
    column_name: String,
    #[diesel(sql_type = Text)]
    type_name: String,
    #[diesel(sql_type = diesel::sql_types::Bool)]
    nullable: bool,
}

#[derive(QueryableByName)]
struct IndexRow {
    #[diesel(sql_type = Text)]
    table_name: String,
    #[diesel(sql_type = Text)]
    index_name: String,
    #[diesel(sql_type = diesel::sql_types::Bool)]
    is_unique: bool,
    #[diesel(sql_type = diesel::sql_types::Bool)]
    is_primary: bool,
    #[diesel(sql_type = Text)]
    columns: String,
}

#[derive(QueryableByName)]
struct ForeignKeyRow {
    #[diesel(sql_type = Text)]
    table_name: String,
    #[diesel(sql_type = Text)]
    constraint_name: String,
    #[diesel(sql_type = Text)]
    columns: String,
    #[diesel(sql_type = Text)]
    referenced_table: String,
    #[diesel(sql_type = Text)]
    referenced_columns: String,
}

fn split(list: &str) -> Vec<String> {
    list.split(',').map(str::to_owned).collect()
}

/// Every index of the `public` schema's tables.
pub async fn indexes(conn: &mut AsyncPgConnection) -> Vec<Index> {
    let rows: Vec<IndexRow> = diesel::sql_query(
        "SELECT t.relname::text AS table_name, i.relname::text AS index_name,
                x.indisunique AS is_unique, x.indisprimary AS is_primary,
                (SELECT string_agg(a.attname::text, ',' ORDER BY k.n)
                   FROM unnest(x.indkey) WITH ORDINALITY AS k(attnum, n)
                   JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum) AS columns
           FROM pg_index x
           JOIN pg_class t ON t.oid = x.indrelid
           JOIN pg_class i ON i.oid = x.indexrelid
           JOIN pg_namespace n ON n.oid = t.relnamespace
          WHERE n.nspname = 'public' AND t.relname <> $1
          ORDER BY t.oid, i.relname",
    )
    .bind::<Text, _>(MIGRATIONS_TABLE)
    .load(conn)
    .await
    .expect("reading pg_index");
    rows.into_iter()
        .map(|r| Index {
            table: r.table_name,
            name: r.index_name,
            unique: r.is_unique,
            primary: r.is_primary,
            columns: split(&r.columns),
        })
        .collect()
}

/// Every foreign key of the `public` schema's tables.
pub async fn foreign_keys(conn: &mut AsyncPgConnection) -> Vec<ForeignKey> {
    let rows: Vec<ForeignKeyRow> = diesel::sql_query(
        "SELECT t.relname::text AS table_name, c.conname::text AS constraint_name,
                (SELECT string_agg(a.attname::text, ',' ORDER BY k.n)
                   FROM unnest(c.conkey) WITH ORDINALITY AS k(attnum, n)
                   JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum)
                  AS columns,
                r.relname::text AS referenced_table,
                (SELECT string_agg(a.attname::text, ',' ORDER BY k.n)
                   FROM unnest(c.confkey) WITH ORDINALITY AS k(attnum, n)
                   JOIN pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.attnum)
                  AS referenced_columns
           FROM pg_constraint c
           JOIN pg_class t ON t.oid = c.conrelid
           JOIN pg_class r ON r.oid = c.confrelid
           JOIN pg_namespace n ON n.oid = t.relnamespace
          WHERE n.nspname = 'public' AND c.contype = 'f'
          ORDER BY t.oid, c.conname",
    )
    .load(conn)
    .await
    .expect("reading pg_constraint");
    rows.into_iter()
        .map(|r| ForeignKey {
            table: r.table_name,
            name: r.constraint_name,
            columns: split(&r.columns),
            referenced_table: r.referenced_table,
            referenced_columns: split(&r.referenced_columns),
        })
        .collect()
}

/// Every table of the `public` schema with its columns and primary key, in creation order.
pub async fn tables(conn: &mut AsyncPgConnection) -> Vec<Table> {
    let rows: Vec<ColumnRow> = diesel::sql_query(
        "SELECT t.relname::text AS table_name, a.attname::text AS column_name,
                ty.typname::text AS type_name, NOT a.attnotnull AS nullable
           FROM pg_class t
           JOIN pg_namespace n ON n.oid = t.relnamespace
           JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum > 0 AND NOT a.attisdropped
           JOIN pg_type ty ON ty.oid = a.atttypid
          WHERE n.nspname = 'public' AND t.relkind = 'r' AND t.relname <> $1
          ORDER BY t.oid, a.attnum",
    )
    .bind::<Text, _>(MIGRATIONS_TABLE)
    .load(conn)
    .await
    .expect("reading pg_attribute");
    let primary_keys = indexes(conn).await;
    let mut tables: Vec<Table> = Vec::new();
    for row in rows {
        if tables.last().is_none_or(|t| t.name != row.table_name) {
            let primary_key = primary_keys
                .iter()
                .find(|i| i.primary && i.table == row.table_name)
                .map(|i| i.columns.clone())
                .unwrap_or_default();
            tables.push(Table {
                name: row.table_name.clone(),
                columns: Vec::new(),
                primary_key,
            });
        }
        if let Some(table) = tables.last_mut() {
            table.columns.push(Column {
                name: row.column_name,
                type_name: row.type_name,
                nullable: row.nullable,
            });
        }
    }
    tables
}

/// Diesel's SQL type of a PostgreSQL type (array elements are declared not null: posture
/// never stores a null in an array).
fn diesel_type(type_name: &str) -> String {
    if let Some(element) = type_name.strip_prefix('_') {
        return format!("Array<{}>", diesel_type(element));
    }
    match type_name {
        "uuid" => "Uuid",
        "text" | "varchar" => "Text",
        "timestamptz" => "Timestamptz",
        "date" => "Date",
        "int2" => "SmallInt",
        "int4" => "Integer",
        "int8" => "BigInt",
        "bool" => "Bool",
        "bytea" => "Bytea",
        "jsonb" => "Jsonb",
        "float8" => "Double",
        other => panic!("no Diesel type for the PostgreSQL type {other}: add it to catalog.rs"),
    }
    .to_owned()
}

/// Migrates the (empty) database at `url` and writes the text of `schema.rs` for it.
pub async fn diesel_schema_of_migrated(url: &str) -> String {
    use diesel_async::AsyncConnection as _;

    posture_store_postgres::migrations::run_pending(url)
        .await
        .expect("migrating the database");
    let mut conn = AsyncPgConnection::establish(url)
        .await
        .expect("connecting to the migrated database");
    diesel_schema(&tables(&mut conn).await)
}

/// The text of `crates/store-postgres/src/schema.rs` for these tables.
pub fn diesel_schema(tables: &[Table]) -> String {
    let mut out = String::from(
        "//! Diesel's view of the tables in `migrations/`, generated from the migrated schema by\n\
         //! `cargo xtask schema` (do not edit: a test fails when it differs from the migrations).\n",
    );
    for table in tables {
        let _ = write!(
            out,
            "\ndiesel::table! {{\n    {} ({}) {{\n",
            table.name,
            table.primary_key.join(", ")
        );
        for column in &table.columns {
            let sql_type = diesel_type(&column.type_name);
            let sql_type = if column.nullable {
                format!("Nullable<{sql_type}>")
            } else {
                sql_type
            };
            let _ = writeln!(out, "        {} -> {sql_type},", column.name);
        }
        out.push_str("    }\n}\n");
    }
    // Braces, which rustfmt leaves as written: the names fill lines of up to 96 columns,
    // keeping the file under the 500 lines of `cargo xtask tidy`.
    out.push_str("\ndiesel::allow_tables_to_appear_in_same_query! {\n");
    let mut line = String::new();
    for table in tables {
        if !line.is_empty() && line.len() + table.name.len() + 2 > 96 {
            let _ = writeln!(out, "{}", line.trim_end());
            line.clear();
        }
        if line.is_empty() {
            line.push_str("   ");
        }
        let _ = write!(line, " {},", table.name);
    }
    let _ = writeln!(out, "{}", line.trim_end());
    out.push_str("}\n");
    out
}
