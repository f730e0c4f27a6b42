// A company's OpenID provider for the single sign-on tests: the npm package oidc-provider (a
// certified OpenID Connect implementation), on loopback, with one confidential client (hyperbook)
// and a few people whose claims the test chooses.
//
// Configuration comes as JSON in IDP_CONFIG:
//   {"port": 0, "client": {"client_id", "client_secret", "redirect_uris"},
//    "accounts": {"<login>": {claims…}}}
// Its development login page accepts a login name from `accounts` with any password (the
// password is the provider's business, not hyperbook's). When listening it prints one line:
//   listening http://127.0.0.1:<port>
// and, for each token response, `issued <access token> <ID token>`.
import { generateKeyPairSync } from 'node:crypto';
import Provider from 'oidc-provider';

const config = JSON.parse(process.env.IDP_CONFIG);
const port = config.port;
const issuer = `http://127.0.0.1:${port}`;
const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const signingKey = { ...privateKey.export({ format: 'jwk' }), kid: 'test-idp-1', alg: 'RS256', use: 'sig' };

const provider = new Provider(issuer, {
  clients: [{
    ...config.client,
    grant_types: ['authorization_code'],
    response_types: ['code'],
    token_endpoint_auth_method: 'client_secret_basic',
  }],
  jwks: { keys: [signingKey] },
  cookies: { keys: ['hyperbook-test-idp-cookie-key'] },
  pkce: { required: () => true },
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['name', 'preferred_username', 'groups', 'stakeholder_id'],
  },
  features: { devInteractions: { enabled: true } },
  async findAccount(ctx, id) {
    const claims = config.accounts[id];
    if (!claims) return undefined;
    return {
      accountId: id,
      async claims() {
        return { sub: id, ...claims };
      },
    };
  },
});
provider.proxy = false;
// What the token endpoint hands out, for the tests to look for where it must never be.
provider.on('grant.success', (ctx) => {
  const { access_token: access, id_token: id } = ctx.body || {};
  process.stdout.write(`issued ${access || '-'} ${id || '-'}\n`);
});
const server = provider.listen(port, '127.0.0.1', () => {
  process.stdout.write(`listening ${issuer}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
