//! The command line of `posture-api` (docs/operations.md, "Binaries and commands").

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use posture_startup::{DatabaseArgs, LogArgs, SecretArgs};
use posture_store_postgres::migrations::RuntimeRole;

use crate::config::ServeArgs;

/// posture's API server and operator commands.
#[derive(Parser, Debug)]
#[command(name = "posture-api", version, about, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// Print one JSON object on stdout instead of text.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(flatten)]
    pub log: LogArgs,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Serve the HTTP API until SIGTERM or Ctrl-C.
    Serve(Box<ServeArgs>),
    /// Apply pending database migrations, then (with --runtime-role) set the runtime role's
    /// privileges. Run as the role that owns the schema.
    Migrate(MigrateArgs),
    /// Manage customers.
    #[command(subcommand)]
    Customers(CustomersCommand),
    /// Connect cloud tenants to customers.
    #[command(subcommand)]
    Tenants(TenantsCommand),
    /// Issue, list and revoke API keys.
    #[command(subcommand)]
    Keys(KeysCommand),
    /// Issue, list, rotate and revoke OAuth 2.0 clients (docs/auth.md).
    #[command(subcommand)]
    Clients(ClientsCommand),
    /// Run one analyzer pass from a JSON Lines file (or `-` for stdin).
    Ingest(IngestArgs),
    /// Inspect and retry webhook deliveries.
    #[command(subcommand)]
    Deliveries(DeliveriesCommand),
    /// Rotate the key that seals webhook signing secrets.
    #[command(subcommand)]
    Secrets(SecretsCommand),
}

#[derive(Args, Debug)]
pub struct MigrateArgs {
    #[command(flatten)]
    pub database: DatabaseArgs,
    /// The role `serve` and `posture-worker` connect as: after the migrations, it gets
    /// exactly the privileges it needs on the schema (no DDL, no TRUNCATE, UPDATE only on the
    /// columns posture writes) and loses any others. The role must exist.
    #[arg(long, env = "POSTURE_RUNTIME_ROLE")]
    pub runtime_role: Option<RuntimeRole>,
}

#[derive(Subcommand, Debug)]
pub enum SecretsCommand {
    /// Seal every webhook signing secret again with POSTURE_SECRET_KEY, so that the keys in
    /// POSTURE_SECRET_KEYS_PREVIOUS can be retired (run after every instance has the new key).
    Reseal {
        #[command(flatten)]
        database: DatabaseArgs,
        #[command(flatten)]
        secrets: SecretArgs,
    },
}

#[derive(Subcommand, Debug)]
pub enum DeliveriesCommand {
    /// List a customer's deliveries, newest first.
    List {
        #[command(flatten)]
        database: DatabaseArgs,
        /// The customer's id.
        #[arg(long)]
        customer: String,
        /// Only deliveries in this state: pending, delivered, failed, cancelled.
        #[arg(long)]
        status: Option<String>,
        /// Only deliveries of this subscription (active or deleted).
        #[arg(long)]
        subscription: Option<String>,
        /// Most deliveries listed.
        #[arg(long, default_value_t = 50)]
        limit: u32,
    },
    /// Show a delivery of a customer with every attempt (and the first KiB of each answer).
    Show {
        #[command(flatten)]
        database: DatabaseArgs,
        /// The customer's id.
        #[arg(long)]
        customer: String,
        /// The delivery's id (X-Service-Delivery).
        delivery_id: String,
    },
    /// Send a delivery that is not pending again (the same bytes and id), due now, on a fresh
    /// schedule, as a consumer's redelivery does.
    Retry {
        #[command(flatten)]
        database: DatabaseArgs,
        /// The delivery's id (X-Service-Delivery).
        delivery_id: String,
    },
}

#[derive(Subcommand, Debug)]
pub enum CustomersCommand {
    /// Create a customer; prints its id.
    Create {
        #[command(flatten)]
        database: DatabaseArgs,
        /// The customer's name.
        #[arg(long)]
        name: String,
    },
    /// List customers.
    List {
        #[command(flatten)]
        database: DatabaseArgs,
    },
    /// What each customer's data takes in the database, by category, the largest first
    /// (reads every row of the customers it measures).
    Usage {
        #[command(flatten)]
        database: DatabaseArgs,
        /// Only this customer.
        #[arg(long)]
        customer: Option<String>,
    },
    /// The customer console's sign-in: each customer's OpenID Connect provider and admins.
    #[command(subcommand)]
    Sso(SsoCommand),
    /// Show or set the customer's inactivity rule: its keys and OAuth clients stop working
    /// once unused this many days (off by default; the customer's admins set it too).
    Inactivity {
        #[command(flatten)]
        database: DatabaseArgs,
        /// The customer's id.
        #[arg(long)]
        customer: String,
        /// Days unused after which a credential stops working (7 to 3650).
        #[arg(long, conflicts_with = "off", value_parser = clap::value_parser!(u32).range(7..=3650))]
        days: Option<u32>,
        /// Clear the rule: credentials never stop working for inactivity.
        #[arg(long)]
        off: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum SsoCommand {
    /// Set (or replace) a customer's identity provider and who its admins are.
    Set(Box<SetSsoArgs>),
    /// Show a customer's identity provider settings (never the client secret).
    Show {
        #[command(flatten)]
        database: DatabaseArgs,
        /// The customer's id.
        #[arg(long)]
        customer: String,
        /// The console's public URL, as `serve` has it: the redirect URI to register is
        /// printed in full.
        #[arg(long = "public-url", env = "POSTURE_PUBLIC_URL", value_parser = crate::config::parse_public_url)]
        public_url: Option<String>,
    },
    /// Require SCIM provisioning for a customer's console (docs/scim.md): only an active
    /// provisioned user whose userName equals the ID token's `--match-claim` may sign in, and
    /// admins are the members of the SCIM group `--admin-group`; `--off` stops requiring it.
    /// A change ends the customer's console sessions.
    Provisioning(ProvisioningArgs),
    /// Remove a customer's identity provider: its console closes and every session ends.
    Clear {
        #[command(flatten)]
        database: DatabaseArgs,
        /// The customer's id.
        #[arg(long)]
        customer: String,
    },
}

#[derive(Args, Debug)]
pub struct SetSsoArgs {
    #[command(flatten)]
    pub database: DatabaseArgs,
    #[command(flatten)]
    pub secrets: posture_startup::SecretArgs,
    /// The customer's id.
    #[arg(long)]
    pub customer: String,
    /// The provider's issuer URL (https; http only on a loopback address, for development).
    #[arg(long)]
    pub issuer: String,
    /// The client id posture was registered with at the provider.
    #[arg(long = "client-id")]
    pub client_id: String,
    /// What the console's sign-in button calls the provider ("Sign in with Contoso Entra
    /// ID"); without it, the issuer's host. Like every setting, set again on each `sso set`.
    #[arg(long = "display-name")]
    pub display_name: Option<String>,
    /// The client's secret (prefer the environment variable: arguments show in `ps`).
    #[arg(
        long = "client-secret",
        env = "POSTURE_SSO_CLIENT_SECRET",
        hide_env_values = true
    )]
    pub client_secret: Option<String>,
    /// The console's public URL, as `serve` has it: the redirect URI to register is
    /// printed in full.
    #[arg(long = "public-url", env = "POSTURE_PUBLIC_URL", value_parser = crate::config::parse_public_url)]
    pub public_url: Option<String>,
    /// Save without asking the issuer for its discovery document first (setting up before
    /// the provider is reachable from here).
    #[arg(long = "no-check")]
    pub no_check: bool,
    /// Networks where the provider may be reached besides public addresses, as `serve` has
    /// them (the check goes through the same rules as a sign-in).
    #[arg(long, env = "POSTURE_SSO_ALLOWED_NETWORKS", default_value = "", value_parser = crate::config::parse_networks)]
    pub sso_allowed_networks: crate::config::Networks,
    /// The ID token claim that names admins, e.g. groups or roles.
    #[arg(long = "admin-claim", requires = "admin_values")]
    pub admin_claim: Option<String>,
    /// A value of the admin claim that makes its holder an admin; repeat for several.
    #[arg(long = "admin-value", requires = "admin_claim")]
    pub admin_values: Vec<String>,
    /// A subject (`sub`) who is an admin; repeat for several.
    #[arg(long = "admin-subject")]
    pub admin_subjects: Vec<String>,
}

#[derive(Args, Debug)]
pub struct ProvisioningArgs {
    #[command(flatten)]
    pub database: DatabaseArgs,
    /// The customer's id.
    #[arg(long)]
    pub customer: String,
    /// The ID token claim matched to a provisioned user's userName: email,
    /// preferred_username, upn, ...
    #[arg(long = "match-claim", requires = "admin_group", conflicts_with = "off")]
    pub match_claim: Option<String>,
    /// The displayName of the SCIM group whose members are the console's admins.
    #[arg(long = "admin-group", requires = "match_claim", conflicts_with = "off")]
    pub admin_group: Option<String>,
    /// Stop requiring provisioning: the admin rule of `sso set` applies again.
    #[arg(long, required_unless_present = "match_claim")]
    pub off: bool,
}

#[derive(Subcommand, Debug)]
pub enum TenantsCommand {
    /// Connect a cloud tenant to a customer (or rename it if connected already).
    Add {
        #[command(flatten)]
        database: DatabaseArgs,
        /// The customer's id.
        #[arg(long)]
        customer: String,
        /// The tenant's id (a GUID).
        #[arg(long = "tenant-id")]
        tenant_id: String,
        /// The tenant's display name.
        #[arg(long)]
        name: String,
        /// The tenant's primary domain, e.g. contoso.onmicrosoft.com.
        #[arg(long)]
        domain: Option<String>,
    },
}

#[derive(Subcommand, Debug)]
pub enum KeysCommand {
    /// Issue a key; prints it once, with its id.
    Issue(IssueKeyArgs),
    /// List a customer's keys (never the keys themselves).
    List {
        #[command(flatten)]
        database: DatabaseArgs,
        /// The customer's id.
        #[arg(long)]
        customer: String,
    },
    /// Revoke a key at once.
    Revoke {
        #[command(flatten)]
        database: DatabaseArgs,
        /// The key's id (from `keys issue` or `keys list`).
        key_id: String,
    },
    /// Set where a key may be used from (its allow-list), at once on every instance.
    AllowFrom(AllowFromArgs),
}

#[derive(Args, Debug)]
pub struct AllowFromArgs {
    #[command(flatten)]
    pub database: DatabaseArgs,
    /// The key's id (a client's id or clientId for `clients allow-from`).
    pub credential: String,
    /// The networks (CIDR, IPv4 or IPv6) or single addresses it may be used from; they
    /// replace the list. At most 32.
    #[arg(required_unless_present = "anywhere", conflicts_with = "anywhere")]
    pub networks: Vec<String>,
    /// Let it be used from any address again (clears the list).
    #[arg(long)]
    pub anywhere: bool,
}

#[derive(Subcommand, Debug)]
pub enum ClientsCommand {
    /// Issue a client; prints its clientId, and for a secret client its clientSecret, once.
    Issue(IssueClientArgs),
    /// List a customer's clients and their credentials (never a secret).
    List {
        #[command(flatten)]
        database: DatabaseArgs,
        /// The customer's id.
        #[arg(long)]
        customer: String,
    },
    /// Give a client a new secret (printed once) or a new public key; its other credentials
    /// lapse at --old-valid-until (now without it).
    Rotate(RotateClientArgs),
    /// Revoke a client at once: its tokens stop working on every instance.
    Revoke {
        #[command(flatten)]
        database: DatabaseArgs,
        /// The client's id or clientId (from `clients issue` or `clients list`).
        client: String,
    },
    /// Set where a client may be used from (its allow-list): the token endpoint and its
    /// tokens, at once on every instance.
    AllowFrom(AllowFromArgs),
}

#[derive(Args, Debug)]
pub struct IssueClientArgs {
    #[command(flatten)]
    pub database: DatabaseArgs,
    /// The customer's id.
    #[arg(long)]
    pub customer: String,
    /// A label for operators and admins.
    #[arg(long)]
    pub name: String,
    /// A scope of the client; repeat for several (as `keys issue` takes them).
    #[arg(long = "scope", required = true)]
    pub scopes: Vec<String>,
    /// The PEM public key (RSA 2048+ or P-256) the client signs its assertions with
    /// (`private_key_jwt`): the client gets no secret.
    #[arg(long = "public-key")]
    pub public_key: Option<std::path::PathBuf>,
    /// A network (CIDR) or address the client may be used from; repeat for several (at
    /// most 32). Without it: from anywhere.
    #[arg(long = "allow-from")]
    pub allow_from: Vec<String>,
}

#[derive(Args, Debug)]
pub struct RotateClientArgs {
    #[command(flatten)]
    pub database: DatabaseArgs,
    /// The client's id or clientId.
    pub client: String,
    /// Add this PEM public key instead of a new secret.
    #[arg(long = "public-key", conflicts_with = "secret")]
    pub public_key: Option<std::path::PathBuf>,
    /// Give a client that signs with a key a secret instead (without it, such a client is
    /// rotated only to another key: a secret is not given to it by omission).
    #[arg(long)]
    pub secret: bool,
    /// Until when the client's other credentials keep working: an RFC 3339 time, or a
    /// lifetime from now (30m, 1d). Without it they stop now.
    #[arg(long = "old-valid-until")]
    pub old_valid_until: Option<String>,
}

#[derive(Args, Debug)]
pub struct IssueKeyArgs {
    #[command(flatten)]
    pub database: DatabaseArgs,
    /// The customer's id.
    #[arg(long)]
    pub customer: String,
    /// A scope of the key; repeat for several (read:identities, read:findings, read:roles,
    /// read:upr, manage:webhooks, provision:scim, write:findings).
    #[arg(long = "scope", required = true)]
    pub scopes: Vec<String>,
    /// A label for operators.
    #[arg(long, default_value = "api key")]
    pub name: String,
    /// Lifetime, e.g. 30d, 12h, 90m, 2w.
    #[arg(long, conflicts_with = "expires_at")]
    pub expires_in: Option<String>,
    /// Expiry as an RFC 3339 time, e.g. 2027-01-01T00:00:00Z.
    #[arg(long)]
    pub expires_at: Option<String>,
    /// A network (CIDR) or address the key may be used from; repeat for several (at most
    /// 32). Without it: from anywhere.
    #[arg(long = "allow-from")]
    pub allow_from: Vec<String>,
}

#[derive(Args, Debug)]
pub struct IngestArgs {
    #[command(flatten)]
    pub database: DatabaseArgs,
    /// The customer's id.
    #[arg(long)]
    pub customer: String,
    /// The JSON Lines file; `-` or nothing reads stdin.
    pub file: Option<PathBuf>,
}
