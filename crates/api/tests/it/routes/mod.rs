mod every_route;
mod findings;
mod identities;
mod roles;
mod tenants;
mod upr;
mod webhooks;
