mod every_route;
mod export;
mod findings;
mod identities;
mod roles;
mod tenants;
mod upr;
mod webhooks;
