//! `posture-api clients`, run as the real binary with the runtime role's privileges.

use super::{EC_PUBLIC, token_status};
use crate::{
    cli::{json_of, posture_api},
    support::TestApp,
};

#[tokio::test]
async fn operators_issue_list_rotate_and_revoke_clients() {
    let app = TestApp::start().await;
    let db = &app.db;
    let customer = json_of(&posture_api(
        db,
        &["customers", "create", "--name", "Contoso", "--json"],
        None,
    ));
    let customer = customer["id"].as_str().unwrap();
    let issued = json_of(&posture_api(
        db,
        &[
            "clients",
            "issue",
            "--customer",
            customer,
            "--name",
            "soar",
            "--scope",
            "read:findings",
            "--json",
        ],
        None,
    ));
    let (id, secret) = (
        issued["clientId"].as_str().unwrap().to_owned(),
        issued["clientSecret"].as_str().unwrap().to_owned(),
    );
    assert!(id.starts_with("pci_") && secret.starts_with("pcs_"));
    assert_eq!(issued["createdBy"], "posture operator");
    assert_eq!(token_status(&app, &id, &secret).await.as_u16(), 200);

    let pem = std::env::temp_dir().join(format!("posture-it-{}.pub", uuid::Uuid::new_v4()));
    std::fs::write(&pem, EC_PUBLIC).unwrap();
    let pem_path = pem.display().to_string();
    let keyed = json_of(&posture_api(
        db,
        &[
            "clients",
            "issue",
            "--customer",
            customer,
            "--name",
            "signed",
            "--scope",
            "read:identities",
            "--public-key",
            &pem_path,
            "--json",
        ],
        None,
    ));
    assert!(keyed.get("clientSecret").is_none(), "{keyed}");
    assert!(
        keyed["credentials"][0]["credential"]
            .as_str()
            .unwrap()
            .starts_with("ES256 key ")
    );

    let listed = json_of(&posture_api(
        db,
        &["clients", "list", "--customer", customer, "--json"],
        None,
    ));
    assert_eq!(listed["data"].as_array().unwrap().len(), 2);
    assert!(
        !listed.to_string().contains(&secret),
        "a list never shows a secret"
    );

    // A key client is not given a secret by leaving its key out.
    let keyed_id = keyed["clientId"].as_str().unwrap();
    let refused = posture_api(db, &["clients", "rotate", keyed_id, "--json"], None);
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("signs with a key"), "{said}");

    let rotated = json_of(&posture_api(
        db,
        &[
            "clients",
            "rotate",
            &id,
            "--old-valid-until",
            "1h",
            "--json",
        ],
        None,
    ));
    let new_secret = rotated["clientSecret"].as_str().unwrap();
    assert_eq!(
        token_status(&app, &id, &secret).await.as_u16(),
        200,
        "the overlap"
    );
    assert_eq!(token_status(&app, &id, new_secret).await.as_u16(), 200);

    let revoked = json_of(&posture_api(
        db,
        &["clients", "revoke", &id, "--json"],
        None,
    ));
    assert!(revoked["revokedAt"].is_string());
    assert_eq!(token_status(&app, &id, new_secret).await.as_u16(), 401);
    std::fs::remove_file(pem).unwrap();
}
