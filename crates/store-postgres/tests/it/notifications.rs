//! Every change of posture's to what a customer's conditional reads show tells the serving
//! processes on the connection they listen on (`NOTIFY posture_data`, delivered at
//! commit), whoever makes it: the API, the operator's commands, the worker. On Citus the
//! rows live on worker nodes, whose triggers cannot notify the coordinator; the store
//! notifies from the coordinator itself, and this suite runs there too.

use std::{pin::pin, time::Duration};

use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use futures_util::StreamExt as _;
use posture_domain::{
    CloudTenantId, CustomerScope,
    ports::{DeliveryRepository, TenantRepository, WebhookRepository},
    secrets::{Keyring, SealedSecret},
    tenant::NewTenant,
    webhook_change::SubscriptionPatch,
};
use posture_test_support::{
    TestDb,
    fixtures::{customer, subscription},
};

/// A connection listening where the API instances do: the database's URL (on Citus, the
/// coordinator).
async fn listener(db: &TestDb) -> AsyncPgConnection {
    let mut conn = AsyncPgConnection::establish(db.url()).await.unwrap();
    diesel::sql_query("LISTEN posture_data")
        .execute(&mut conn)
        .await
        .unwrap();
    conn
}

/// Waits (at most 5 s) for a notification naming `scope`'s customer; ignores others.
async fn heard(conn: &mut AsyncPgConnection, scope: CustomerScope, what: &str) {
    let customer = scope.customer_id().as_uuid().to_string();
    let mut notifications = pin!(conn.notifications_stream());
    let wait = async {
        while let Some(notification) = notifications.next().await {
            if notification.unwrap().payload == customer {
                return;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(5), wait)
        .await
        .unwrap_or_else(|_| panic!("{what}: no posture_data notification for the customer"));
}

fn sealed() -> SealedSecret {
    SealedSecret {
        key_id: "test".into(),
        nonce: vec![0; 12],
        ciphertext: vec![1; 48],
    }
}

#[tokio::test]
async fn every_change_to_subscriptions_and_tenants_notifies_the_listening_processes() {
    let db = TestDb::new().await;
    let store = db.store();
    let mut listen = listener(&db).await;
    let scope = customer(&store, "A").await;
    let keyring = Keyring::new(&[7; 32], &[]).unwrap();

    store
        .connect_tenant(
            scope,
            NewTenant {
                cloud_tenant_id: CloudTenantId::from_uuid(uuid::Uuid::new_v4()),
                display_name: "Contoso".into(),
                primary_domain: None,
            },
        )
        .await
        .unwrap();
    heard(&mut listen, scope, "a tenant connected").await;

    let (id, _) = subscription(
        &store,
        &keyring,
        scope,
        "https://receiver.example/hook",
        "generic",
        &["finding_high"],
    )
    .await;
    heard(&mut listen, scope, "a subscription created").await;

    let pause = SubscriptionPatch {
        active: Some(false),
        ..SubscriptionPatch::default()
    };
    store
        .update_subscription(scope, id, &pause, None)
        .await
        .unwrap();
    heard(&mut listen, scope, "a subscription paused").await;

    let resume = SubscriptionPatch {
        active: Some(true),
        ..SubscriptionPatch::default()
    };
    store
        .update_subscription(scope, id, &resume, None)
        .await
        .unwrap();
    heard(&mut listen, scope, "a subscription resumed").await;

    let overlap = chrono::Utc::now() + chrono::Duration::milliseconds(200);
    store
        .rotate_secret(scope, id, &sealed(), Some(overlap), false, None)
        .await
        .unwrap();
    heard(&mut listen, scope, "a secret rotated").await;

    // The worker forgets the previous secret once its overlap ended.
    tokio::time::timeout(Duration::from_secs(5), async {
        while store
            .expire_holds_and_secrets(chrono::Utc::now())
            .await
            .unwrap()
            .1
            == 0
        {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the overlap ends");
    heard(
        &mut listen,
        scope,
        "a previous secret forgotten by the worker",
    )
    .await;

    // The worker disables a subscription that failed for days.
    TestDb::execute(
        &db,
        &format!(
            "UPDATE webhook_subscriptions SET failing_since = '2020-01-01T00:00:00Z' \
         WHERE customer_id = '{}' AND id = '{}'",
            scope.customer_id().as_uuid(),
            id.as_uuid()
        ),
    )
    .await;
    let disabled = store.disable_failing(chrono::Utc::now()).await.unwrap();
    assert_eq!(disabled, vec![(scope.customer_id(), id)]);
    heard(
        &mut listen,
        scope,
        "a failing subscription disabled by the worker",
    )
    .await;

    store.deactivate_subscription(scope, id).await.unwrap();
    heard(&mut listen, scope, "a subscription deleted").await;
}
