//! The CLI with an OAuth client instead of a key: it fetches a token, keeps it, and fetches
//! another when the service refuses the one it holds.

use std::{sync::Arc, time::Duration};

use posture_cli::{
    client::{Api, ApiError, Retries},
    credential::SigningKey,
    target::{Proof, Target},
    whoami,
};
use posture_domain::{Scope, console::Actor, ports::ClientRepository};

use crate::{
    oauth::{EC_PRIVATE, EC_PUBLIC, client},
    support::TestApp,
};

fn api(target: Target) -> Api {
    let retries = Retries {
        first_wait: Duration::from_millis(20),
        max_wait: Duration::from_millis(200),
        attempts: 3,
    };
    Api::new(target, retries, Arc::new(|_: &str| {})).unwrap()
}

#[tokio::test]
async fn the_cli_reads_with_a_secret_client_and_with_a_private_key_client() {
    let app = TestApp::start().await;
    let (scope, _) = app.customer_with_one_of_each("Contoso").await;
    let secret = client(&app, scope, &[Scope::ReadFindings], None).await;
    let keyed = client(&app, scope, &[Scope::ReadIdentities], Some(EC_PUBLIC)).await;
    let proofs = [
        (&secret, Proof::Secret(secret.secret.clone().unwrap())),
        (
            &keyed,
            Proof::PrivateKey(SigningKey::from_pem(EC_PRIVATE).unwrap()),
        ),
    ];
    for (client, proof) in proofs {
        let target = Target::with_client(Some(&app.base), &client.client_id, proof).unwrap();
        let api = api(target);
        let me = whoami::fetch(&api).await.unwrap();
        assert_eq!(me.key.prefix, client.client_id[..10]);
        assert_eq!(me.key.customer.name, "Contoso");
        // The same token serves the next request.
        let again = whoami::fetch(&api).await.unwrap();
        assert_eq!(again.key.prefix, me.key.prefix);
    }
}

#[tokio::test]
async fn a_revoked_client_is_said_in_words() {
    let app = TestApp::start().await;
    let (scope, _) = app.customer_with_one_of_each("Contoso").await;
    let issued = client(&app, scope, &[Scope::ReadFindings], None).await;
    let proof = Proof::Secret(issued.secret.clone().unwrap());
    let api = api(Target::with_client(Some(&app.base), &issued.client_id, proof).unwrap());
    whoami::fetch(&api).await.unwrap();
    app.store
        .revoke_client(None, issued.id, &Actor::Operator)
        .await
        .unwrap();
    // The held token is refused, the CLI asks for another, and the client is refused.
    let refused = whoami::fetch(&api).await.unwrap_err();
    assert!(
        matches!(refused, ApiError::ClientRefused { .. }),
        "{refused}"
    );
    let said = refused.to_string();
    assert!(said.contains("POSTURE_CLIENT_ID"), "{said}");
    assert!(!said.contains(issued.secret.as_deref().unwrap()), "{said}");
}
