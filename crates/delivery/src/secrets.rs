//! A subscription's signing secrets, opened for one delivery's attempts (the worker's and
//! a test delivery's), and the headers they sign.

use posture_domain::{
    Result,
    delivery::{Delivery, DeliveryTarget},
    secrets::{Keyring, SigningSecret},
    webhook::secret_context,
};

use crate::client::DeliveryHeaders;

/// A subscription's signing secrets, opened: the current one, and the previous one while
/// a rotation's overlap lasts.
pub struct Secrets {
    current: SigningSecret,
    previous: Option<SigningSecret>,
}

impl Secrets {
    /// The headers of an attempt of `delivery` (whose id is `id`).
    pub fn headers<'a>(&'a self, delivery: &Delivery, id: &'a str) -> DeliveryHeaders<'a> {
        DeliveryHeaders {
            event: delivery.event_type.as_str(),
            delivery_id: id,
            secret: self.current.expose(),
            previous: self.previous.as_ref().map(SigningSecret::expose),
        }
    }
}

/// Opens the target's secrets (sealed for this subscription).
pub fn open_secrets(
    keyring: &Keyring,
    delivery: &Delivery,
    target: &DeliveryTarget,
) -> Result<Secrets> {
    let context = secret_context(delivery.customer_id, delivery.subscription_id);
    Ok(Secrets {
        current: keyring.open(&target.secret, &context)?,
        previous: target
            .previous_secret
            .as_ref()
            .map(|sealed| keyring.open(sealed, &context))
            .transpose()?,
    })
}
