//! Rules of the key cache, one by one.

use posture_domain::{CustomerId, KeyId, Scope, ScopeSet};

use super::*;

fn principal() -> Principal {
    Principal::verified(
        KeyId::generate(),
        CustomerId::generate(),
        [Scope::ReadFindings].into_iter().collect::<ScopeSet>(),
    )
}

fn get(cache: &KeyCache, hash: &KeyHash, now: DateTime<Utc>) -> Option<Principal> {
    match cache.known(hash, now) {
        KnownKey::Valid(principal) => Some(principal),
        _ => None,
    }
}

fn live() -> KeyCache {
    let cache = KeyCache::default();
    cache.set_live(true);
    cache
}

#[test]
fn nothing_is_served_while_the_listen_connection_is_down() {
    let cache = KeyCache::default();
    let generation = cache.generation();
    cache.insert(KeyHash([1; 32]), principal(), None, generation);
    assert_eq!(get(&cache, &KeyHash([1; 32]), Utc::now()), None);
}

#[test]
fn a_cached_key_is_served_until_an_invalidation() {
    let cache = live();
    let p = principal();
    cache.insert(KeyHash([1; 32]), p.clone(), None, cache.generation());
    assert_eq!(get(&cache, &KeyHash([1; 32]), Utc::now()), Some(p));
    assert_eq!(get(&cache, &KeyHash([2; 32]), Utc::now()), None);
    cache.invalidate();
    assert_eq!(get(&cache, &KeyHash([1; 32]), Utc::now()), None);
    assert_eq!(
        cache.stats(),
        KeyCacheStats {
            hits: 1,
            unknown_hits: 0,
            misses: 0,
            live: true,
            versions: Default::default(),
        }
    );
}

#[test]
fn a_row_read_before_an_invalidation_is_not_cached_after_it() {
    let cache = live();
    let generation = cache.generation();
    // ... the database read happens here, and a revocation's notification arrives ...
    cache.invalidate();
    cache.insert(KeyHash([1; 32]), principal(), None, generation);
    assert_eq!(get(&cache, &KeyHash([1; 32]), Utc::now()), None);
}

#[test]
fn an_expired_key_is_not_served_from_the_cache() {
    let cache = live();
    let expires = Utc::now() + chrono::Duration::seconds(5);
    cache.insert(
        KeyHash([1; 32]),
        principal(),
        Some(expires),
        cache.generation(),
    );
    assert!(get(&cache, &KeyHash([1; 32]), Utc::now()).is_some());
    assert_eq!(
        get(
            &cache,
            &KeyHash([1; 32]),
            expires + chrono::Duration::seconds(1)
        ),
        None
    );
}

#[test]
fn losing_the_listen_connection_empties_the_cache() {
    let cache = live();
    cache.insert(KeyHash([1; 32]), principal(), None, cache.generation());
    cache.set_live(false);
    cache.set_live(true);
    assert_eq!(get(&cache, &KeyHash([1; 32]), Utc::now()), None);
}

#[test]
fn a_key_found_unknown_is_answered_from_memory_until_keys_change() {
    let cache = live();
    let hash = KeyHash([3; 32]);
    assert_eq!(cache.known(&hash, Utc::now()), KnownKey::Unseen);
    cache.insert_unknown(&hash, cache.generation());
    assert_eq!(cache.known(&hash, Utc::now()), KnownKey::Unknown);
    assert_eq!(cache.stats().unknown_hits, 1);
    cache.invalidate();
    assert_eq!(cache.known(&hash, Utc::now()), KnownKey::Unseen);
}

#[test]
fn an_unknown_key_read_before_a_key_change_is_not_remembered() {
    let cache = live();
    let generation = cache.generation();
    cache.invalidate();
    cache.insert_unknown(&KeyHash([3; 32]), generation);
    assert_eq!(cache.known(&KeyHash([3; 32]), Utc::now()), KnownKey::Unseen);
}

#[test]
fn unknown_keys_are_bounded_and_the_oldest_go_first() {
    let cache = live();
    let hash = |i: usize| {
        let mut bytes = [0u8; 32];
        bytes[..8].copy_from_slice(&(i as u64).to_be_bytes());
        KeyHash(bytes)
    };
    for i in 0..=MAX_REMEMBERED {
        cache.insert_unknown(&hash(i), cache.generation());
    }
    let unknown = cache.unknown();
    assert_eq!(unknown.order.len(), MAX_REMEMBERED);
    assert_eq!(unknown.since.len(), MAX_REMEMBERED);
    assert!(!unknown.contains(&hash(0)), "the oldest went first");
    assert!(unknown.contains(&hash(MAX_REMEMBERED)));
}

#[test]
fn a_key_seen_valid_stays_recent_through_invalidations_until_found_invalid() {
    let cache = live();
    let hash = KeyHash([4; 32]);
    cache.insert(hash, principal(), None, cache.generation());
    cache.invalidate();
    assert_eq!(cache.known(&hash, Utc::now()), KnownKey::Recent);
    cache.insert_unknown(&hash, cache.generation());
    assert_eq!(cache.known(&hash, Utc::now()), KnownKey::Unknown);
    cache.invalidate();
    assert_eq!(
        cache.known(&hash, Utc::now()),
        KnownKey::Unseen,
        "found invalid: no longer recent"
    );
}

#[test]
fn the_cache_stops_serving_when_the_listen_connection_stops_answering() {
    let cache = KeyCache {
        started: Instant::now() - Duration::from_secs(10),
        ..KeyCache::default()
    };
    cache.set_live(true);
    let p = principal();
    cache.insert(KeyHash([1; 32]), p.clone(), None, cache.generation());
    assert_eq!(get(&cache, &KeyHash([1; 32]), Utc::now()), Some(p.clone()));
    // Its last answer was to a query sent longer ago than FRESH_FOR: the connection may
    // be stalled with notifications in flight.
    let stale = KeyCache {
        started: Instant::now() - Duration::from_secs(10),
        ..KeyCache::default()
    };
    stale.confirm(Instant::now() - FRESH_FOR - Duration::from_millis(10));
    stale.insert(KeyHash([1; 32]), p.clone(), None, stale.generation());
    assert_eq!(get(&stale, &KeyHash([1; 32]), Utc::now()), None);
    assert!(!stale.stats().live);
    // An answer to a query sent now makes it servable again.
    stale.confirm(Instant::now());
    stale.insert(KeyHash([1; 32]), p.clone(), None, stale.generation());
    assert_eq!(get(&stale, &KeyHash([1; 32]), Utc::now()), Some(p));
}

#[test]
fn an_answer_older_than_the_last_one_does_not_shorten_freshness() {
    let cache = live();
    cache.confirm(Instant::now());
    let before = cache.fresh_until.load(Ordering::Acquire);
    cache.confirm(cache.started);
    assert_eq!(cache.fresh_until.load(Ordering::Acquire), before);
    cache.set_live(false);
    assert!(!cache.stats().live);
}
