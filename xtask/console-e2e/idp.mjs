// The identity provider of posture's console browser tests: node-oidc-provider (a certified
// OpenID Connect implementation, not a fake of the protocol) with its development sign-in
// pages, one confidential client for posture, and two users of "Contoso Group":
//   alice: an admin (groups claim holds "posture-admins");
//   bob:   staff, not an admin.
// Configured by environment: IDP_PORT, IDP_CLIENT_ID, IDP_CLIENT_SECRET, IDP_REDIRECT_URIS
// (space-separated: one console callback per customer signing in here).
import Provider from "oidc-provider";

const port = Number(process.env.IDP_PORT);
const issuer = `http://127.0.0.1:${port}`;

const accounts = {
  alice: {
    sub: "alice",
    name: "Alice Admin",
    email: "alice@contoso.example",
    email_verified: true,
    groups: ["staff", "posture-admins"],
  },
  bob: {
    sub: "bob",
    name: "Bob Builder",
    email: "bob@contoso.example",
    email_verified: true,
    groups: ["staff"],
  },
};

const provider = new Provider(issuer, {
  clients: [
    {
      client_id: process.env.IDP_CLIENT_ID,
      client_secret: process.env.IDP_CLIENT_SECRET,
      redirect_uris: process.env.IDP_REDIRECT_URIS.split(" "),
      grant_types: ["authorization_code"],
      response_types: ["code"],
      token_endpoint_auth_method: "client_secret_basic",
    },
  ],
  // posture must use PKCE (S256); the provider refuses an authorization request without it.
  pkce: { required: () => true },
  claims: {
    openid: ["sub"],
    profile: ["name", "groups"],
    email: ["email", "email_verified"],
  },
  // Put the scopes' claims into the ID token (posture reads the admin claim there).
  conformIdTokenClaims: false,
  findAccount: async (_ctx, id) =>
    accounts[id] && { accountId: id, claims: async () => accounts[id] },
  features: { devInteractions: { enabled: true } },
  cookies: { keys: ["posture-console-e2e"] },
});

provider.listen(port, "127.0.0.1", () => {
  console.log(`identity provider listening on ${issuer}`);
});
