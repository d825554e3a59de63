// A real OpenID Provider for the identity tests: panva's oidc-provider 9 (certified), configured as an
// MCP deployment needs it. Listens on PORT at ISSUER, signing with the private JWK set JWKS (the test
// holds it, to forge expired and not-yet-valid tokens the provider would not issue). Every account
// logs in with any password on the provider's own dev pages; "alice@acme" is in tenant "acme" (the
// part after "@"). Client-credentials clients come from CLIENTS (JSON: [{client_id, client_secret,
// tenant, scope}]). Any resource (RFC 8707) matching RESOURCES (a regex: a gateway's /mcp on loopback)
// gets JWT access tokens for that audience carrying the tenant claim. TTL: token lifetime in seconds.
// A client with redirect_uris is a confidential authorization-code client (an OAuth proxy's);
// REGISTRATION=off turns dynamic registration off (an IdP like Entra ID or Okta).
import Provider from 'oidc-provider';

const { PORT, ISSUER, JWKS, CLIENTS = '[]', TTL = '300' } = process.env;
const RESOURCES = new RegExp(process.env.RESOURCES || '^http://127\\.0\\.0\\.1:[0-9]+(/servers/[a-z0-9_-]+)?/mcp$');
const clients = JSON.parse(CLIENTS);
const tenants = Object.fromEntries(clients.map((c) => [c.client_id, c.tenant]));
const SCOPES = 'tools:read tools:call tools:admin tools:federate';

const provider = new Provider(ISSUER, {
  clients: clients.map((c) => (c.redirect_uris && c.redirect_uris.length ? {
    // a confidential web client registered by hand (an OAuth proxy's, as at Entra ID or Okta)
    client_id: c.client_id,
    client_secret: c.client_secret,
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    redirect_uris: c.redirect_uris,
    scope: `openid offline_access ${c.scope}`,
    token_endpoint_auth_method: 'client_secret_basic',
  } : {
    client_id: c.client_id,
    client_secret: c.client_secret,
    grant_types: ['client_credentials'],
    response_types: [],
    redirect_uris: [],
    scope: c.scope,
    token_endpoint_auth_method: 'client_secret_basic',
  })),
  jwks: JSON.parse(JWKS),
  scopes: ['openid', 'offline_access', ...SCOPES.split(' ')],
  clientDefaults: { token_endpoint_auth_method: 'none', grant_types: ['authorization_code', 'refresh_token'] },
  features: {
    clientCredentials: { enabled: true },
    registration: { enabled: process.env.REGISTRATION !== 'off' },
    devInteractions: { enabled: true },
    introspection: { enabled: true },
    resourceIndicators: {
      enabled: true,
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, resource) => {
        if (!RESOURCES.test(resource)) throw new Error(`unknown resource ${resource}`);
        return { scope: SCOPES, audience: resource, accessTokenTTL: Number(TTL), accessTokenFormat: 'jwt' };
      },
    },
  },
  async findAccount(ctx, id) {
    return { accountId: id, async claims() { return { sub: id }; } };
  },
  async extraTokenClaims(ctx, token) {
    if (token.accountId) return { tenant: token.accountId.split('@')[1] || null };
    return { tenant: tenants[token.clientId] || null };
  },
  ttl: { AccessToken: Number(TTL), ClientCredentials: Number(TTL) },
  pkce: { required: () => true },
});
provider.proxy = false;
provider.listen(Number(PORT), '127.0.0.1', () => console.log(`listening ${ISSUER}`));
