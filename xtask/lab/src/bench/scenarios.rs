//! The read routes the bench loads: each route's request, the SQL baselines its throughput
//! is compared with, and the same read through PostgREST.

use std::process::Command;

use super::{
    load::{Customer, Loaded},
    peer::{self, Peer},
    sql,
};
use crate::process::output;

/// The SQL a route's throughput is compared with, run through pgbench at the same
/// concurrency.
pub struct Baseline {
    pub name: &'static str,
    pub script: String,
    /// Least ratio of the route's requests/s to the script's transactions/s.
    pub target: Option<f64>,
}

/// The same read through PostgREST (`peer.rs`): its path and the headers beyond the key.
pub struct PeerRequest {
    pub path: String,
    pub headers: Vec<String>,
}

impl PeerRequest {
    /// A list: the count of every match, as `meta.total`.
    pub fn list(path: String) -> Option<Self> {
        Some(Self {
            path,
            headers: vec!["Prefer: count=exact".into()],
        })
    }
}

/// One route under load, with the SQL baselines it is compared against.
pub struct Scenario {
    pub name: String,
    pub path: String,
    pub customer: Customer,
    pub vars: Vec<(&'static str, String)>,
    pub baselines: Vec<Baseline>,
    /// The same read through PostgREST.
    pub peer: Option<PeerRequest>,
    /// p99 target at 16 connections.
    pub p99_target: Option<f64>,
    /// Most `posture-api` CPU per request, as a share of PostgreSQL's for the same requests.
    pub cpu_target: Option<f64>,
}

pub fn scenarios(loaded: &Loaded, detail_id: &str) -> Vec<Scenario> {
    let with_key = |script: String| format!("{}{script}", sql::KEY_LOOKUP);
    let page = |offset: usize| sql::FINDINGS_PAGE.replace(":o", &offset.to_string());
    let findings = |who: &str, customer: &Customer, offset: usize| {
        format!(
            "GET /findings crit+high open, {who} ({} rows), offset {offset}",
            customer.findings
        )
    };
    let peer_list = |offset: usize| {
        PeerRequest::list(format!(
            "/findings?select={}&severity_rank=in.(1,2)&status=eq.open\
             &order=severity_rank,detectedAt.desc,id&limit=100&offset={offset}",
            peer::FINDING_FIELDS
        ))
    };
    // The overhead target (docs/performance.md) is set on the small customer's first page.
    let posture_sql = |offset: usize, target: Option<f64>| Baseline {
        name: "SQL posture runs (page + totals)",
        script: format!("{}{}", page(offset), sql::FINDINGS_TOTALS),
        target,
    };
    let mut list = vec![Scenario {
        name: findings("small customer", &loaded.small, 0),
        path: "/api/v1/findings?severity=critical,high&status=open&limit=100&offset=0".into(),
        customer: loaded.small.clone(),
        vars: Vec::new(),
        baselines: vec![
            Baseline {
                name: "SQL key lookup + page + COUNT",
                script: with_key(format!("{}{}", page(0), sql::FINDINGS_COUNT)),
                target: Some(0.8),
            },
            posture_sql(0, Some(0.75)),
        ],
        peer: peer_list(0),
        p99_target: Some(25.0),
        cpu_target: Some(0.4),
    }];
    for offset in [0, 10_000] {
        list.push(Scenario {
            name: findings("200k-row customer", &loaded.largest, offset),
            path: format!(
                "/api/v1/findings?severity=critical,high&status=open&limit=100&offset={offset}"
            ),
            customer: loaded.largest.clone(),
            vars: Vec::new(),
            baselines: vec![
                Baseline {
                    name: "SQL page + COUNT",
                    script: format!("{}{}", page(offset), sql::FINDINGS_COUNT),
                    target: Some(1.5),
                },
                posture_sql(offset, None),
            ],
            peer: peer_list(offset),
            p99_target: None,
            cpu_target: None,
        });
    }
    list.push(Scenario {
        name: format!(
            "GET /identities, 200k-row customer ({} identities)",
            loaded.largest.identities
        ),
        path: "/api/v1/identities?limit=100".into(),
        customer: loaded.largest.clone(),
        vars: Vec::new(),
        baselines: vec![Baseline {
            name: "SQL key lookup + page + COUNT",
            script: with_key(format!("{}{}", sql::IDENTITIES_PAGE, sql::IDENTITIES_COUNT)),
            target: Some(0.8),
        }],
        peer: PeerRequest::list(format!(
            "/identities?select={}&order=id&limit=100",
            peer::IDENTITY_FIELDS
        )),
        p99_target: None,
        cpu_target: None,
    });
    list.push(Scenario {
        name: "GET /findings/{id}, 200k-row customer".into(),
        path: format!("/api/v1/findings/{detail_id}"),
        customer: loaded.largest.clone(),
        vars: vec![("f", detail_id.to_owned())],
        baselines: vec![Baseline {
            name: "SQL key lookup + finding",
            script: with_key(sql::FINDING_DETAIL.to_owned()),
            target: Some(0.8),
        }],
        peer: Some(PeerRequest {
            path: format!(
                "/findings?select={}&id=eq.{detail_id}",
                peer::FINDING_FIELDS
            ),
            headers: vec!["Accept: application/vnd.pgrst.object+json".into()],
        }),
        p99_target: Some(25.0),
        cpu_target: Some(1.0),
    });
    list
}

/// Whether PostgREST answers the request 2xx (it refuses a range past the end with 416
/// where posture answers an empty page: a small run's deep offset); says so when not.
pub fn peer_answers(peer: &Peer, request: &PeerRequest, key: &str) -> bool {
    let mut command = Command::new("curl");
    command.args(["-s", "-o", "/dev/null", "-w", "%{http_code}"]);
    for header in request
        .headers
        .iter()
        .cloned()
        .chain([format!("X-Api-Key: {key}")])
    {
        command.arg("-H").arg(header);
    }
    let status = output(command.arg(format!("{}{}", peer.base, request.path))).unwrap_or_default();
    let answers = status.starts_with('2');
    if !answers {
        crate::process::eprintln_status(&format!(
            "PostgREST answers {status} to {}: no peer figure for it",
            request.path
        ));
    }
    answers
}
