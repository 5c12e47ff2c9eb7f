//! Tidy tests: the layering of the design card, checked from `cargo metadata`.

#[cfg(test)]
mod tests {
    use std::{
        collections::{BTreeSet, HashMap},
        process::Command,
    };

    use serde_json::Value;

    use crate::files::project_root;

    /// Package name -> names of its normal (non-dev, non-build) dependencies, resolved.
    fn normal_dependency_graph() -> (HashMap<String, Vec<String>>, HashMap<String, String>) {
        let output = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .current_dir(project_root())
            .args(["metadata", "--format-version", "1", "--locked"])
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let metadata: Value = serde_json::from_slice(&output.stdout).unwrap();
        let names: HashMap<String, String> = metadata["packages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                (
                    p["id"].as_str().unwrap().to_owned(),
                    p["name"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        let mut graph = HashMap::new();
        for node in metadata["resolve"]["nodes"].as_array().unwrap() {
            let deps = node["deps"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| {
                    d["dep_kinds"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .any(|k| k["kind"].is_null())
                })
                .map(|d| d["pkg"].as_str().unwrap().to_owned())
                .collect();
            graph.insert(node["id"].as_str().unwrap().to_owned(), deps);
        }
        (graph, names)
    }

    /// Every package `name` depends on, transitively, through normal dependencies.
    fn closure(name: &str) -> BTreeSet<String> {
        let (graph, names) = normal_dependency_graph();
        let root = names
            .iter()
            .find(|(_, n)| *n == name)
            .map(|(id, _)| id.clone())
            .unwrap();
        let mut seen = BTreeSet::new();
        let mut stack = vec![root];
        while let Some(id) = stack.pop() {
            for dep in graph.get(&id).into_iter().flatten() {
                if seen.insert(names[dep].clone()) {
                    stack.push(dep.clone());
                }
            }
        }
        seen
    }

    #[test]
    fn domain_depends_on_no_io_technology() {
        let deps = closure("posture-domain");
        let forbidden = [
            "diesel",
            "diesel-async",
            "tokio",
            "tokio-postgres",
            "actix-web",
            "actix-http",
            "actix-rt",
            "redis",
            "deadpool",
            "deadpool-redis",
            "reqwest",
            "hyper",
            "mio",
        ];
        let found: Vec<_> = forbidden.iter().filter(|f| deps.contains(**f)).collect();
        assert!(
            found.is_empty(),
            "posture-domain must not depend on {found:?}"
        );
    }

    #[test]
    fn http_depends_on_no_adapter_crate() {
        let deps = closure("posture-http");
        let adapters = [
            "posture-store-postgres",
            "posture-redis",
            "posture-delivery",
            "diesel",
            "redis",
        ];
        let found: Vec<_> = adapters.iter().filter(|a| deps.contains(**a)).collect();
        assert!(
            found.is_empty(),
            "posture-http must not depend on {found:?}"
        );
    }

    #[test]
    fn adapters_depend_on_the_domain_not_on_each_other() {
        for adapter in ["posture-store-postgres", "posture-redis"] {
            let deps = closure(adapter);
            assert!(
                deps.contains("posture-domain"),
                "{adapter} implements the domain's ports"
            );
            for other in [
                "posture-http",
                "posture-redis",
                "posture-delivery",
                "actix-web",
            ] {
                assert!(
                    !deps.contains(other),
                    "{adapter} must not depend on {other}"
                );
            }
        }
    }
}
