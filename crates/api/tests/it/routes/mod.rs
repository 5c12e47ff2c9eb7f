mod identities;
mod tenants;
