//! The `webhooks` section (OpenAPI 3.1): what posture POSTs to subscribed receivers.

use aide::openapi::{
    MediaType, Operation, Parameter, ParameterData, ParameterSchemaOrContent, PathItem,
    ReferenceOr, RequestBody, Response, Responses, SchemaObject, StatusCode,
};
use indexmap::IndexMap;
use posture_domain::{delivery::DeliveryEvent, webhook::EventType};
use posture_wire::webhooks::FindingEventBody;
use schemars::SchemaGenerator;
use serde_json::{Value, json};

fn schema(value: Value) -> SchemaObject {
    SchemaObject {
        json_schema: schemars::Schema::try_from(value).expect("a webhook schema is a JSON object"),
        external_docs: None,
        example: None,
    }
}

fn header(name: &str, description: &str, value: Value) -> ReferenceOr<Parameter> {
    ReferenceOr::Item(Parameter::Header {
        parameter_data: ParameterData {
            name: name.to_owned(),
            description: Some(description.to_owned()),
            required: true,
            deprecated: None,
            format: ParameterSchemaOrContent::Schema(schema(value)),
            example: None,
            examples: IndexMap::new(),
            explode: None,
            extensions: IndexMap::new(),
        },
        style: Default::default(),
    })
}

fn response(description: &str) -> ReferenceOr<Response> {
    ReferenceOr::Item(Response {
        description: description.to_owned(),
        ..Response::default()
    })
}

/// What an event's operation says: its summary and description.
fn describe(event: DeliveryEvent) -> (String, String) {
    const SHARED: &str = "Subscriptions of type `slack` get a Slack Block Kit message and `teams` \
         an Adaptive Card message instead of this body, with the same headers. Any 2xx within \
         10 s acknowledges; 410 deactivates the subscription; anything else is retried with \
         backoff for about 23 hours. See docs/webhooks.md.";
    let lifecycle = |what: &str, rule: &str| {
        (
            format!("Findings {what}"),
            format!(
                "Opt-in. Sent after an analyzer pass in which findings the customer already had \
                 {rule}, to each active subscription listing `{}`: one POST per chunk of at most \
                 100 findings, each with its `change` (`field`, `from`, `to`). {SHARED}",
                event.as_str()
            ),
        )
    };
    match event {
        DeliveryEvent::Ping => (
            "Test delivery (ping)".to_owned(),
            "Sent once, at once, when a consumer calls `POST /webhooks/{id}/test` without \
             `eventType`: `\"test\": true` and no findings. (A test with `eventType` sends that \
             event's body with one sample finding and `\"test\": true`.) Signed and sent like \
             every delivery, never retried. See docs/webhooks.md."
                .to_owned(),
        ),
        DeliveryEvent::Event(EventType::FindingResolved) => {
            lifecycle("resolved", "became `resolved`")
        }
        DeliveryEvent::Event(EventType::FindingSuppressed) => {
            lifecycle("suppressed", "became `suppressed`")
        }
        DeliveryEvent::Event(EventType::FindingReopened) => lifecycle(
            "reopened",
            "became `open` again (from resolved or suppressed)",
        ),
        DeliveryEvent::Event(EventType::FindingSeverityChanged) => {
            lifecycle("changed severity", "changed severity")
        }
        DeliveryEvent::Event(EventType::FindingTriaged) => (
            "Findings triaged".to_owned(),
            format!(
                "Opt-in. Sent when a key changes the triage of findings (`PATCH /findings/{{id}}` \
                 or `POST /findings/triage`), to each active subscription listing `{}`: one POST \
                 per write and chunk of at most 100 findings, each with its `change` (`field`: \
                 `triageState`, `from`, `to`) and its `triage` as it is now. {SHARED}",
                event.as_str()
            ),
        ),
        DeliveryEvent::Event(EventType::FindingTriageExpired) => (
            "Findings' triage expired".to_owned(),
            format!(
                "Opt-in. Sent when triage marks reach their `expiresAt` and the sweep records \
                 the findings as `untriaged` again (within a minute of the expiry), to each \
                 active subscription listing `{}`: one POST per chunk of at most 100 findings, \
                 each with its `change` (`field`: `triageState`, `from`: the expired state, \
                 `to`: `untriaged`). {SHARED}",
                event.as_str()
            ),
        ),
        DeliveryEvent::Event(
            new @ (EventType::FindingCritical
            | EventType::FindingHigh
            | EventType::FindingMedium
            | EventType::FindingLow),
        ) => {
            let severity = new.severity().map_or("", |s| s.as_str());
            (
                format!("New {severity} findings"),
                format!(
                    "Sent after an analyzer pass that found new {severity} findings, to each \
                     active subscription listing `{}`: one POST per chunk of at most 100 \
                     findings. {SHARED}",
                    event.as_str()
                ),
            )
        }
    }
}

/// One webhook per event type, and the test ping.
pub(super) fn webhooks(generator: &mut SchemaGenerator) -> IndexMap<String, ReferenceOr<PathItem>> {
    let body = generator.subschema_for::<FindingEventBody>();
    DeliveryEvent::ALL
        .iter()
        .map(|event| {
            let (summary, description) = describe(*event);
            let parameters = vec![
                header("X-Service-Event", "The event type, for routing without parsing the body.", json!({"type": "string", "const": event.as_str()})),
                header(
                    "X-Service-Signature-256",
                    "`sha256=` + lowercase hex HMAC-SHA256 of the exact body bytes, keyed with the subscription's signing secret (the whole `whsec_...` string). Verify it in constant time before trusting the body.",
                    json!({"type": "string", "pattern": "^sha256=[0-9a-f]{64}$"}),
                ),
                header("X-Service-Delivery", "The delivery's id: the same on every retry; use it to drop duplicates.", json!({"type": "string", "format": "uuid"})),
                header("webhook-id", "Standard Webhooks: the delivery's id (equal to `X-Service-Delivery`).", json!({"type": "string", "format": "uuid"})),
                header("webhook-timestamp", "Standard Webhooks: this attempt's time, in Unix seconds. Refuse deliveries whose time is far from yours (a replay).", json!({"type": "string", "pattern": "^[0-9]{1,12}$"})),
                header(
                    "webhook-signature",
                    "Standard Webhooks: `v1,` + base64 HMAC-SHA256 of `{webhook-id}.{webhook-timestamp}.{body}`, keyed with the bytes of the secret's base64 part; space-separated entries. The official `standardwebhooks` libraries verify it given the `whsec_...` secret.",
                    json!({"type": "string", "pattern": "^v1,[A-Za-z0-9+/=]{44}( v1,[A-Za-z0-9+/=]{44})*$"}),
                ),
                header("User-Agent", "`posture-webhooks/<version>`.", json!({"type": "string"})),
            ];
            let operation = Operation {
                tags: vec!["webhooks".to_owned()],
                summary: Some(summary),
                description: Some(description),
                operation_id: Some(format!("on_{}", event.as_str())),
                parameters,
                request_body: Some(ReferenceOr::Item(RequestBody {
                    description: Some("The `generic` body.".to_owned()),
                    content: IndexMap::from([(
                        "application/json".to_owned(),
                        MediaType { schema: Some(SchemaObject { json_schema: body.clone(), external_docs: None, example: None }), ..MediaType::default() },
                    )]),
                    required: true,
                    ..RequestBody::default()
                })),
                responses: Some(Responses {
                    responses: IndexMap::from([
                        (StatusCode::Range(2), response("Acknowledged: the delivery is done.")),
                        (StatusCode::Code(410), response("Gone: posture deactivates the subscription.")),
                    ]),
                    default: Some(response("Anything else (including redirects, which are not followed): retried later.")),
                    ..Responses::default()
                }),
                ..Operation::default()
            };
            (event.as_str().to_owned(), ReferenceOr::Item(PathItem { post: Some(operation), ..PathItem::default() }))
        })
        .collect()
}

/// The deliveries posture sends are authenticated by their signature headers, not by a
/// security scheme of this document: each webhook operation says so with `security: []`
/// (set on the rendered document: aide omits an empty list).
pub fn declare_signed(document: &mut serde_json::Value) {
    if let Some(webhooks) = document["webhooks"].as_object_mut() {
        for operation in webhooks
            .values_mut()
            .filter_map(|item| item.get_mut("post"))
        {
            operation["security"] = serde_json::Value::Array(Vec::new());
        }
    }
}
