//! Fair shares of the webhook worker: no customer, and no receiver, can hold every slot.
//!
//! A worker sends on two lanes of slots. A subscription whose receiver answers promptly is
//! served on the prompt lane; one recognised slow by its latency (the moving average of its
//! attempts reaches [`FairShare::slow_after`]; a timeout counts as the timeout) is served on
//! the slow lane only, so a slow receiver delays other slow receivers at most, never a
//! prompt one. On each lane:
//!
//! - a claim hands out due deliveries round-robin: every customer's first, then every
//!   customer's second, and within a customer every subscription's first, then second
//!   (oldest due first within a subscription, as before);
//! - a subscription has at most [`FairShare::per_subscription`] deliveries in flight over
//!   every worker together (counted in the database, claims taking turns);
//! - a customer holds at most [`LaneSlots::per_customer`] of a worker's slots of the lane:
//!   all but a reserve of an eighth (at least one slot), which only other customers may
//!   take, so a customer whose deliveries come due finds a slot at once however busy
//!   another is.
//!
//! The worker is work-conserving within these bounds: a lone busy customer uses every slot
//! but the reserve, and a claim never waits for a turn that nobody else wants.

use std::{collections::HashMap, time::Duration};

use crate::ids::CustomerId;

/// A lane of a worker's slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Lane {
    /// Subscriptions whose receivers answer promptly (and those not measured yet).
    Prompt,
    /// Subscriptions recognised slow by their latency.
    Slow,
}

impl Lane {
    pub const ALL: [Lane; 2] = [Lane::Prompt, Lane::Slow];

    pub fn as_str(self) -> &'static str {
        match self {
            Lane::Prompt => "prompt",
            Lane::Slow => "slow",
        }
    }
}

/// Deliveries of one subscription in flight at once by default, over every worker.
pub const DEFAULT_PER_SUBSCRIPTION: u32 = 4;
/// The average latency from which a subscription is served on the slow lane, by default.
pub const DEFAULT_SLOW_AFTER: Duration = Duration::from_secs(2);
/// The weight of a new attempt's latency in a subscription's moving average, in tenths:
/// `average = (7 × average + 3 × latency) / 10`. With the defaults, one answer after 9 s (or
/// a timeout, which counts as the 10 s timeout) moves a prompt subscription to the slow
/// lane; five prompt answers in a row move it back.
pub const LATENCY_WEIGHT_TENTHS: i32 = 3;

/// The bounds every worker applies together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FairShare {
    /// Deliveries of one subscription in flight at once, over every worker.
    pub per_subscription: u32,
    /// The average latency from which a subscription is served on the slow lane.
    pub slow_after: Duration,
}

impl Default for FairShare {
    fn default() -> Self {
        Self {
            per_subscription: DEFAULT_PER_SUBSCRIPTION,
            slow_after: DEFAULT_SLOW_AFTER,
        }
    }
}

impl FairShare {
    /// The slow threshold in whole milliseconds, as latencies are stored.
    pub fn slow_after_ms(&self) -> i32 {
        i32::try_from(self.slow_after.as_millis()).unwrap_or(i32::MAX)
    }
}

/// The moving average of a subscription's latency after an attempt that took `latency_ms`
/// (the first attempt's latency is the average).
pub fn average_latency(previous_ms: Option<u32>, latency_ms: u32) -> u32 {
    match previous_ms {
        None => latency_ms,
        Some(previous) => {
            let weight = LATENCY_WEIGHT_TENTHS as u64;
            ((u64::from(previous) * (10 - weight) + u64::from(latency_ms) * weight) / 10) as u32
        }
    }
}

/// The size of a lane and what one customer may hold of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaneSlots {
    pub slots: usize,
    /// Slots one customer may hold at once: all but a reserve of an eighth (at least one),
    /// or the lone slot of a lane of one.
    pub per_customer: usize,
}

impl LaneSlots {
    pub fn new(slots: usize) -> Self {
        let slots = slots.max(1);
        let reserve = (slots / 8).max(1);
        Self {
            slots,
            per_customer: slots.saturating_sub(reserve).max(1),
        }
    }
}

/// What a worker asks of the queue for one lane: at most `limit` due deliveries, leased to
/// `worker` for `lease`, within the bounds.
#[derive(Clone, Debug)]
pub struct ClaimRequest<'a> {
    pub worker: &'a str,
    pub lane: Lane,
    pub limit: u32,
    pub lease: Duration,
    pub share: FairShare,
    /// Slots of the lane one customer may hold on this worker.
    pub per_customer: u32,
    /// What this worker holds on the lane now, by customer.
    pub held: Vec<(CustomerId, u32)>,
}

impl<'a> ClaimRequest<'a> {
    /// A claim of up to `limit` on the prompt lane bounded by `limit` alone (no bound per
    /// subscription or customer below it): what tests of the queue itself ask.
    pub fn unbounded(worker: &'a str, limit: u32, lease: Duration) -> Self {
        Self {
            worker,
            lane: Lane::Prompt,
            limit,
            lease,
            share: FairShare {
                per_subscription: limit,
                ..FairShare::default()
            },
            per_customer: limit,
            held: Vec::new(),
        }
    }

    /// How many more of `customer`'s deliveries this claim may take.
    pub fn room_of(&self, customer: CustomerId) -> u32 {
        let held = self
            .held
            .iter()
            .find(|(c, _)| *c == customer)
            .map_or(0, |(_, n)| *n);
        self.per_customer.saturating_sub(held)
    }
}

/// The slots a worker's deliveries hold, by lane and customer.
#[derive(Debug)]
pub struct LaneBook {
    lanes: [(LaneSlots, Holding); 2],
}

#[derive(Debug, Default)]
struct Holding {
    busy: usize,
    of_customer: HashMap<CustomerId, usize>,
}

impl LaneBook {
    /// A worker of `prompt` and `slow` slots.
    pub fn new(prompt: usize, slow: usize) -> Self {
        Self {
            lanes: [
                (LaneSlots::new(prompt), Holding::default()),
                (LaneSlots::new(slow), Holding::default()),
            ],
        }
    }

    fn lane(&self, lane: Lane) -> &(LaneSlots, Holding) {
        &self.lanes[lane as usize]
    }

    fn lane_mut(&mut self, lane: Lane) -> &mut (LaneSlots, Holding) {
        &mut self.lanes[lane as usize]
    }

    pub fn slots(&self, lane: Lane) -> LaneSlots {
        self.lane(lane).0
    }

    /// Slots of `lane` free now.
    pub fn free(&self, lane: Lane) -> usize {
        let (slots, holding) = self.lane(lane);
        slots.slots.saturating_sub(holding.busy)
    }

    /// Deliveries in flight on every lane.
    pub fn busy(&self) -> usize {
        self.lanes.iter().map(|(_, h)| h.busy).sum()
    }

    /// What each customer holds of `lane`.
    pub fn held(&self, lane: Lane) -> Vec<(CustomerId, u32)> {
        self.lane(lane)
            .1
            .of_customer
            .iter()
            .map(|(c, n)| (*c, u32::try_from(*n).unwrap_or(u32::MAX)))
            .collect()
    }

    /// The claim of `lane`'s free slots.
    pub fn claim<'a>(
        &self,
        worker: &'a str,
        lane: Lane,
        lease: Duration,
        share: FairShare,
    ) -> ClaimRequest<'a> {
        let slots = self.slots(lane);
        ClaimRequest {
            worker,
            lane,
            limit: u32::try_from(self.free(lane)).unwrap_or(u32::MAX),
            lease,
            share,
            per_customer: u32::try_from(slots.per_customer).unwrap_or(u32::MAX),
            held: self.held(lane),
        }
    }

    /// A delivery of `customer` took a slot of `lane`.
    pub fn take(&mut self, lane: Lane, customer: CustomerId) {
        let (_, holding) = self.lane_mut(lane);
        holding.busy += 1;
        *holding.of_customer.entry(customer).or_default() += 1;
    }

    /// A delivery of `customer` gave its slot of `lane` back.
    pub fn give_back(&mut self, lane: Lane, customer: CustomerId) {
        let (_, holding) = self.lane_mut(lane);
        holding.busy = holding.busy.saturating_sub(1);
        if let Some(n) = holding.of_customer.get_mut(&customer) {
            *n -= 1;
            if *n == 0 {
                holding.of_customer.remove(&customer);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_customer_leaves_a_reserve_of_every_lane_to_the_others() {
        assert_eq!(LaneSlots::new(16).per_customer, 14);
        assert_eq!(LaneSlots::new(8).per_customer, 7);
        assert_eq!(LaneSlots::new(4).per_customer, 3);
        assert_eq!(LaneSlots::new(2).per_customer, 1);
        // A lane of one slot cannot keep a reserve: its customer takes it.
        assert_eq!(LaneSlots::new(1).per_customer, 1);
        assert_eq!(LaneSlots::new(0), LaneSlots::new(1));
    }

    #[test]
    fn the_book_counts_slots_by_lane_and_customer() {
        let mut book = LaneBook::new(4, 2);
        let (a, b) = (CustomerId::generate(), CustomerId::generate());
        book.take(Lane::Prompt, a);
        book.take(Lane::Prompt, a);
        book.take(Lane::Slow, b);
        assert_eq!(book.free(Lane::Prompt), 2);
        assert_eq!(book.free(Lane::Slow), 1);
        assert_eq!(book.busy(), 3);
        let claim = book.claim(
            "w",
            Lane::Prompt,
            Duration::from_secs(60),
            FairShare::default(),
        );
        assert_eq!(claim.limit, 2);
        assert_eq!(claim.per_customer, 3);
        assert_eq!(claim.room_of(a), 1, "a holds 2 of its 3");
        assert_eq!(claim.room_of(b), 3, "b holds nothing of this lane");
        book.give_back(Lane::Prompt, a);
        book.give_back(Lane::Prompt, a);
        assert!(
            book.held(Lane::Prompt).is_empty(),
            "a customer holding nothing is forgotten"
        );
        assert_eq!(book.free(Lane::Prompt), 4);
    }

    #[test]
    fn one_slow_answer_moves_a_subscription_and_five_prompt_ones_move_it_back() {
        let slow = DEFAULT_SLOW_AFTER.as_millis() as u32;
        let prompt = average_latency(None, 40);
        assert!(prompt < slow);
        assert!(
            average_latency(Some(prompt), 3_000) < slow,
            "one answer after 3 s among prompt ones is not enough"
        );
        assert!(
            average_latency(Some(prompt), 9_000) >= slow,
            "one answer after 9 s is"
        );
        let mut average = average_latency(None, 9_000);
        assert!(average >= slow, "a first answer after 9 s is slow");
        let mut prompt_answers = 0;
        while average >= slow {
            average = average_latency(Some(average), 50);
            prompt_answers += 1;
        }
        assert_eq!(prompt_answers, 5);
        assert_eq!(average_latency(Some(u32::MAX), u32::MAX), u32::MAX);
    }
}
