//! The route table of a surface outside the OpenAPI contract: SCIM (`scim/`), the console
//! (`posture-console`), and whatever is added beside them. Each route is one [`Mount`]: its
//! template, its method and the route serving it. The table is the one list its surface is
//! mounted from ([`scope`]) and the access log and metrics name its requests by
//! ([`templates`]); a template's `Allow` (on a 405) is read from it too, so no list is kept
//! by hand beside another.
//!
//! `/api/v1` has the richer [`Endpoint`](crate::routes::Endpoint): its routes are the
//! contract, so each states what it reads and answers. The surfaces here state theirs in
//! their own documents (SCIM's `/Schemas`, the console's pages) and share the rest: the one
//! middleware (`pipeline.rs`), its access log and its metrics.

use actix_web::{HttpResponse, Resource, Route, Scope, dev::ResourceDef, web};

use crate::routes::HttpMethod;

/// One route of a surface: a request for `template` with `method` is served by `route`.
#[derive(Clone, Copy)]
pub struct Mount {
    /// The route's template, relative to its surface's prefix (`/Users/{id}`).
    pub template: &'static str,
    /// Its method (a GET is not also a HEAD here).
    pub method: HttpMethod,
    /// The route serving it, without a method guard (`|| web::to(handler)`).
    pub route: fn() -> Route,
}

impl Mount {
    pub const fn get(template: &'static str, route: fn() -> Route) -> Mount {
        Mount {
            template,
            method: HttpMethod::Get,
            route,
        }
    }

    pub const fn post(template: &'static str, route: fn() -> Route) -> Mount {
        Mount {
            template,
            method: HttpMethod::Post,
            route,
        }
    }

    pub const fn put(template: &'static str, route: fn() -> Route) -> Mount {
        Mount {
            template,
            method: HttpMethod::Put,
            route,
        }
    }

    pub const fn patch(template: &'static str, route: fn() -> Route) -> Mount {
        Mount {
            template,
            method: HttpMethod::Patch,
            route,
        }
    }

    pub const fn delete(template: &'static str, route: fn() -> Route) -> Mount {
        Mount {
            template,
            method: HttpMethod::Delete,
            route,
        }
    }
}

/// The table's templates, each once, in the table's order.
pub fn templates(table: &[Mount]) -> Vec<&'static str> {
    let mut templates: Vec<&'static str> = Vec::new();
    for mount in table {
        if !templates.contains(&mount.template) {
            templates.push(mount.template);
        }
    }
    templates
}

/// The methods the table gives `template`, as `Allow` lists them (`GET, POST`).
pub fn allow(table: &[Mount], template: &str) -> String {
    let methods: Vec<&str> = table
        .iter()
        .filter(|m| m.template == template)
        .map(|m| m.method.as_str())
        .collect();
    methods.join(", ")
}

/// The table's resources: one per template, in the table's order (actix gives a request to
/// the first whose template matches: a literal `/Users/.search` goes before `/Users/{id}`),
/// each with its methods' routes; any other method is refused with the error `not_allowed`
/// makes of the template's `Allow` (in the surface's own shape).
pub fn resources<E>(table: &[Mount], not_allowed: fn(String) -> E) -> Vec<Resource>
where
    E: Into<actix_web::Error> + 'static,
{
    templates(table)
        .into_iter()
        .map(|template| {
            let allow = allow(table, template);
            let refuse = move || {
                let refused = not_allowed(allow.clone());
                async move { Err::<HttpResponse, E>(refused) }
            };
            table
                .iter()
                .filter(|m| m.template == template)
                .fold(web::resource(template), |resource, mount| {
                    resource.route((mount.route)().method(mount.method.actix()))
                })
                .default_service(web::to(refuse))
        })
        .collect()
}

/// The scope at `prefix` serving the table's [`resources`].
pub fn scope<E>(prefix: &str, table: &[Mount], not_allowed: fn(String) -> E) -> Scope
where
    E: Into<actix_web::Error> + 'static,
{
    resources(table, not_allowed)
        .into_iter()
        .fold(web::scope(prefix), |scope, resource| {
            scope.service(resource)
        })
}

/// What is wrong with a table, if anything (its surface's tests assert nothing is): a
/// method listed twice for one template (it would show twice in `Allow`), or a template that
/// an earlier one takes (actix tries them in the table's order, so `/Users/{id}` listed
/// before `/Users/.search` would answer the search's requests itself).
pub fn faults(table: &[Mount]) -> Vec<String> {
    let mut faults = Vec::new();
    for (i, mount) in table.iter().enumerate() {
        let twice = table[..i]
            .iter()
            .any(|m| m.template == mount.template && m.method == mount.method);
        if twice {
            let method = mount.method.as_str();
            faults.push(format!("{method} {}: listed twice", mount.template));
        }
    }
    let templates = templates(table);
    for (j, later) in templates.iter().enumerate() {
        // A path the later template serves: its parameters filled in.
        let path: String = later
            .split('/')
            .map(|segment| match segment.starts_with('{') {
                true => "x",
                false => segment,
            })
            .collect::<Vec<_>>()
            .join("/");
        for earlier in &templates[..j] {
            if ResourceDef::new(*earlier).is_match(&path) {
                faults.push(format!(
                    "{earlier} takes {later}'s requests: list {later} first"
                ));
            }
        }
    }
    faults
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &[Mount] = &[
        Mount::get("/a", || web::to(|| async { "a" })),
        Mount::post("/a", || web::to(|| async { "posted" })),
        Mount::post("/a/.search", || web::to(|| async { "search" })),
        Mount::delete("/a/{id}", || web::to(|| async { "deleted" })),
    ];

    #[test]
    fn templates_are_listed_once_in_the_tables_order() {
        assert_eq!(templates(TABLE), ["/a", "/a/.search", "/a/{id}"]);
    }

    #[test]
    fn a_table_in_order_has_no_faults() {
        assert_eq!(faults(TABLE), Vec::<String>::new());
    }

    #[test]
    fn a_template_listed_after_one_that_takes_it_and_a_method_listed_twice_are_faults() {
        let table = &[
            Mount::delete("/a/{id}", || web::to(|| async { "deleted" })),
            Mount::post("/a/.search", || web::to(|| async { "search" })),
            Mount::delete("/a/{id}", || web::to(|| async { "again" })),
        ];
        assert_eq!(
            faults(table),
            [
                "DELETE /a/{id}: listed twice",
                "/a/{id} takes /a/.search's requests: list /a/.search first",
            ]
        );
    }

    #[test]
    fn allow_names_every_method_of_a_template() {
        assert_eq!(allow(TABLE, "/a"), "GET, POST");
        assert_eq!(allow(TABLE, "/a/{id}"), "DELETE");
        assert_eq!(allow(TABLE, "/b"), "");
    }

    #[actix_web::test]
    async fn a_method_the_table_lacks_gets_not_allowed_with_allow() {
        use actix_web::{error::ErrorMethodNotAllowed, http::Method, test};
        let app = test::init_service(actix_web::App::new().service(scope(
            "",
            TABLE,
            ErrorMethodNotAllowed::<String>,
        )))
        .await;
        let call = |method: Method, path: &'static str| {
            test::TestRequest::default()
                .method(method)
                .uri(path)
                .to_request()
        };
        let body = test::call_and_read_body(&app, call(Method::POST, "/a")).await;
        assert_eq!(body, "posted");
        // The literal template comes first, not taken by `{id}`.
        let body = test::call_and_read_body(&app, call(Method::POST, "/a/.search")).await;
        assert_eq!(body, "search");
        let response = test::call_service(&app, call(Method::PUT, "/a")).await;
        assert_eq!(response.status(), 405);
        assert_eq!(test::read_body(response).await, "GET, POST");
        let body = test::call_and_read_body(&app, call(Method::DELETE, "/a/7")).await;
        assert_eq!(body, "deleted");
    }
}
